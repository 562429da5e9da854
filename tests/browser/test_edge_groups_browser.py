"""The DAG view in a real browser: a quorum group's policy on its node, the group table with the sibling it
cancelled, and the why line naming a group still waiting."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import sign_in
from tests.dashboard.test_flow_edge_groups import _finish, _quorum_flow
from tests.dashboard_fixtures import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_dag_view_shows_group_policies_the_cancelled_sibling_and_the_waiting_group(
        page: Page, live_server, operator, dashboard_backend):
    fid, ids = _quorum_flow(dashboard_backend)
    _finish(dashboard_backend, fid, ids[0])
    sign_in(page, live_server.url, operator.username, PASSWORD)
    page.goto(f"{live_server.url}/flows/{fid}/")
    expect(page.locator("#flow-why")).to_contain_text("merge waits for its edge group (quorum 2 of 3")
    merge = page.locator(f"#flow-svg g.node[data-eid='{ids[3]}']")
    expect(merge.locator("title")).to_contain_text("inbound edges: quorum 2 of 3 · cancel remaining")
    table = page.locator("#edge-groups")
    expect(table).to_have_attribute("open", "")
    expect(table.locator(f"tr[data-eid='{ids[4]}'] td[data-policy]")).to_have_text("any of 2 · let run")
    _finish(dashboard_backend, fid, ids[1])  # the quorum is met: mirror c is cancelled
    page.reload()
    expect(page.locator("#flow-why")).to_have_count(0)
    expect(table.locator(f"tr[data-eid='{ids[3]}'] td[data-cancelled] a")).to_have_text("mirror c")
    expect(page.locator(f"#flow-svg g.node[data-eid='{ids[2]}'] text.node-state")).to_have_text("cancelled")
