"""Issue #36: the DAG view names its nodes (a `.name` tag, else kind + short id) with state and duration, opens
on the member that matters, pans and zooms, and sits above the tag and cancel forms."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from ffcore.flows.dag import resolve_outgoing
from ffcore.flows.flows import Flows
from tests.browser.conftest import sign_in
from tests.dashboard_fixtures import PASSWORD
from tests.ffcore.invariants import claim, complete, fail

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _flow(backend):
    flows = Flows(backend)
    fid = flows.create(kind="thumbnails")
    members = [{"kind": "split", "tags": {"app.name": "split the batch"}}] + [{"kind": "leaf"} for _ in range(8)]
    ids = flows.build(fid, members, [(0, i) for i in range(1, 9)])
    f = claim(backend, ids[0])
    complete(backend, ids[0], f)
    resolve_outgoing(backend, [(ids[0], fid, "success")])
    fail(backend, ids[3], claim(backend, ids[3]), reason="schema mismatch")
    claim(backend, ids[5])
    return fid, ids


def _centre(box):
    return box["x"] + box["width"] / 2, box["y"] + box["height"] / 2


def test_nodes_are_named_with_state_and_duration_and_the_graph_comes_first(page: Page, live_server, operator,
                                                                          dashboard_backend):
    fid, ids = _flow(dashboard_backend)
    sign_in(page, live_server.url, operator.username, PASSWORD)
    page.goto(f"{live_server.url}/flows/{fid}/")
    nodes = page.locator("#flow-svg g.node")
    expect(nodes).to_have_count(9)
    root = page.locator(f"#flow-svg g.node[data-eid='{ids[0]}']")
    expect(root.locator("text.node-name")).to_have_text("split the batch")
    expect(root.locator("text.node-state")).to_have_text(re.compile(r"^completed · \d+(\.\d)? m?s$"))
    names = [nodes.nth(i).locator("text.node-name").text_content() for i in range(9)]
    assert len(set(names)) == 9  # eight members of one kind still tell apart
    leaf = ids[1].rsplit(":", 1)[-1][:8]
    expect(page.locator(f"#flow-svg g.node[data-eid='{ids[1]}'] text.node-name")).to_have_text(f"leaf {leaf}")
    expect(page.locator(f"#flow-svg g.node[data-eid='{ids[1]}'] text.node-state")).to_have_text("waiting")
    expect(page.locator(f"#flow-svg g.node[data-eid='{ids[3]}'] text.node-state")).to_have_text(
        re.compile(r"^failed · "))
    running = page.locator(f"#flow-svg g.node[data-eid='{ids[5]}'] text.node-state")
    expect(running).to_have_text(re.compile(r"^active · "))
    first = running.text_content()
    expect(running).not_to_have_text(first or "", timeout=3000)  # a running member's duration moves
    expect(page.locator(f"#flow-svg g.node[data-eid='{ids[0]}'] title")).to_contain_text(str(ids[0]))
    # The graph comes before the tag and cancel forms.
    order = page.evaluate("""() => ['flow-graph', 'flow-cancel', 'tags'].map((id) => {
      const el = document.getElementById(id); return el ? el.getBoundingClientRect().top + window.scrollY : null; })""")
    graph_top, cancel_top, tags_top = order
    assert cancel_top is not None and graph_top < cancel_top
    assert tags_top is not None and graph_top < tags_top


def test_it_opens_on_the_failed_member_and_pans_and_zooms(page: Page, live_server, operator, dashboard_backend):
    fid, ids = _flow(dashboard_backend)
    sign_in(page, live_server.url, operator.username, PASSWORD)
    page.goto(f"{live_server.url}/flows/{fid}/")
    box = page.locator("#flow-graph")
    failed = page.locator(f"#flow-svg g.node[data-eid='{ids[3]}']")
    expect(failed).to_have_attribute("data-start", "1")  # the first failed member, not an arbitrary leaf
    expect(page.locator("#flow-svg g.node[data-start]")).to_have_count(1)
    expect(page.locator("#flow-tools")).to_be_visible()
    scale = float(box.get_attribute("data-scale") or 0)
    page.click("#flow-tools [data-view=in]")
    page.click("#flow-tools [data-view=in]")
    zoomed = float(box.get_attribute("data-scale") or 0)
    assert zoomed > scale * 1.5
    svg_box = page.locator("#flow-svg").bounding_box()
    page.mouse.move(*_centre(svg_box))
    page.mouse.wheel(0, 400)
    expect(box).not_to_have_attribute("data-scale", f"{zoomed:.3f}")
    assert float(box.get_attribute("data-scale") or 0) < zoomed  # wheel down zooms out
    # Back to the failed member: centred in the box.
    page.click("#flow-tools [data-view=start]")
    cx, cy = _centre(failed.locator("rect").bounding_box())
    sx, sy = _centre(svg_box)
    assert abs(cx - sx) < 5 and abs(cy - sy) < 5
    # A drag pans the drawing, and a drag that ends on a node does not open it.
    before = page.locator("#flow-svg g.viewport").get_attribute("transform")
    page.mouse.move(cx, cy)
    page.mouse.down()
    page.mouse.move(cx + 60, cy + 30, steps=5)
    page.mouse.up()
    after = page.locator("#flow-svg g.viewport").get_attribute("transform")
    assert after != before
    assert page.url.endswith(f"/flows/{fid}/")
    nx, ny = _centre(failed.locator("rect").bounding_box())
    assert abs(nx - (cx + 60)) < 3 and abs(ny - (cy + 30)) < 3
    # A plain click still opens the member.
    failed.locator("rect").click()
    page.wait_for_url(re.compile(r"/executions/"))
    expect(page.locator("h1")).to_contain_text(str(ids[3]))
