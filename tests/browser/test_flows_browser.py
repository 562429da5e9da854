"""The DAG view in a real browser: a 50-node flow is drawn, laid out once per revision, nodes link to executions."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from ffcore.flows.dag import resolve_outgoing
from ffcore.flows.flows import Flows
from tests.browser.conftest import sign_in
from tests.dashboard_fixtures import PASSWORD
from tests.ffcore.invariants import claim, complete

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_50_node_flow_is_drawn_and_a_node_opens_its_execution(page: Page, live_server, operator, dashboard_backend):
    flows = Flows(dashboard_backend)
    fid = flows.create(kind="pipeline")
    members = [{"kind": "start"}] + [{"kind": f"step{i}"} for i in range(48)] + [{"kind": "finish"}]
    edges = [(0, i) for i in range(1, 25)] + [(i, i + 24) for i in range(1, 25)] + [(i, 49) for i in range(25, 49)]
    ids = flows.build(fid, members, edges)
    f = claim(dashboard_backend, ids[0])
    complete(dashboard_backend, ids[0], f)
    resolve_outgoing(dashboard_backend, [(ids[0], fid, "success")])

    sign_in(page, live_server.url, operator.username, PASSWORD)
    page.goto(live_server.url + "/flows/")  # the nav link is added in base.html by the lead
    page.click(f"a:text('{fid}')")
    expect(page.locator("#flow-summary")).to_contain_text("50 members")
    expect(page.locator("#flow-summary")).to_contain_text("1 completed")
    svg = page.locator("#flow-svg")
    expect(svg).to_be_visible()
    expect(page.locator("#flow-svg g.node")).to_have_count(50)
    expect(page.locator("#flow-svg path.edge")).to_have_count(len(edges))
    expect(page.locator(f"#flow-svg g.node[data-eid='{ids[0]}']")).to_have_class("node n-completed")
    expect(page.locator(f"#flow-svg g.node[data-eid='{ids[1]}']")).to_have_class("node n-waiting")
    expect(page.locator(f"#flow-svg g.node[data-eid='{ids[49]}']")).to_have_class("node n-waiting_children")
    assert page.locator("#flow-svg path.e-satisfied").count() == 24
    assert page.locator("#flow-graph").get_attribute("data-layout") == "computed"
    page.reload()
    expect(page.locator("#flow-svg g.node")).to_have_count(50)
    assert page.locator("#flow-graph").get_attribute("data-layout") == "cached"  # same revision: no re-layout

    page.click("#flow-tools [data-view=fit]")  # the page opens on the root at full size; see it all
    page.locator(f"#flow-svg g.node[data-eid='{ids[30]}']").click()
    page.wait_for_url(f"**/executions/*{ids[30].uuid}/")
    expect(page.locator("h1")).to_contain_text(ids[30])
    expect(page.locator("#public-state")).to_have_text("waiting children")
    expect(page.locator("#flow-link")).to_have_text(fid)
    expect(page.locator("#flow-upstream")).to_contain_text(ids[6])


def test_a_big_flow_in_focus_mode_refreshes_its_collapsed_group_in_place(page: Page, live_server, operator,
                                                                         dashboard_backend):
    flows = Flows(dashboard_backend)
    fid = flows.create(kind="fan-out")
    root, *leaves = flows.build(fid, [{"kind": "root"}] + [{"kind": "leaf"} for _ in range(520)],
                                [(0, i) for i in range(1, 521)])
    sign_in(page, live_server.url, operator.username, PASSWORD)
    page.goto(f"{live_server.url}/flows/{fid}/?focus={root}&hops=1")
    expect(page.locator("#flow-summary")).to_contain_text("521 members")
    group = page.locator(f"#flow-svg g.node[data-eid='group:{root}:down']")
    expect(group.locator("title")).to_have_text("+512: 512 other")
    expect(page.locator("#flow-svg g.node")).to_have_count(1 + 8 + 1)
    expect(page.locator("#flow-members tbody tr")).to_have_count(100)  # the member list is paged

    f = claim(dashboard_backend, root)
    complete(dashboard_backend, root, f)
    resolve_outgoing(dashboard_backend, [(root, fid, "success")])
    hidden = max(map(str, leaves))  # the highest id is never among the 8 shown
    f = claim(dashboard_backend, hidden)
    complete(dashboard_backend, hidden, f)
    page.evaluate("window.__same_page = true")
    # What a pushed engine event does (the live socket is not part of this server): refresh in place.
    page.evaluate("document.getElementById('flow-graph').dispatchEvent(new Event('ff:live'))")
    expect(page.locator(f"#flow-svg g.node[data-eid='{root}']")).to_have_class("node n-completed focus")
    expect(group.locator("title")).to_have_text("+512: 1 done · 511 other")
    assert page.evaluate("window.__same_page") is True
