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


def test_the_group_table_follows_the_flow_live_and_keeps_a_tag_being_typed(page: Page, asgi_server, backend):
    """No reload: the quorum met and the sibling it cancelled reach the open table by push (server-rendered, no
    request of the tab), while the tag form the operator is typing into keeps its text and the section stays open."""
    from ffcore import events
    from ffcore.flows.dag import resolve_outgoing
    from tests.browser.asgi_server import PASSWORD as ASGI_PASSWORD

    fid, ids = _quorum_flow(backend)
    sign_in(page, asgi_server.url, "otto", ASGI_PASSWORD)
    page.goto(f"{asgi_server.url}/flows/{fid}/")
    expect(page.locator("body")).to_have_attribute("data-live", "on")
    merge = page.locator(f"#edge-group-table tr[data-eid='{ids[3]}']")
    expect(merge).to_contain_text("0 succeeded · 3 running")
    page.locator("input[name=tag-key]").fill("ops.owner")
    page.locator("input[name=tag-value]").fill("half-typ")
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    for eid in ids[:2]:
        _finish(backend, fid, eid)
    resolve_outgoing(backend, [(ids[2], fid, "cancelled")])  # the completion listener's part for the sibling
    events.touched(backend, fid)  # what the engine announces when members of the flow change
    events.flush_all()
    expect(merge.locator("td[data-cancelled] a")).to_have_text("mirror c")
    expect(merge).to_contain_text("2 succeeded · 1 cancelled by the group")
    expect(page.locator("#edge-groups")).to_have_attribute("open", "")
    expect(page.locator("input[name=tag-key]")).to_have_value("ops.owner")
    expect(page.locator("input[name=tag-value]")).to_have_value("half-typ")
    assert not [u for u in requests if "/groups" in u]  # pushed rendered, never fetched by the tab
