"""Issue #25 part A in a real browser against daphne: live list rows, state-aware actions, search by bare
UUID and prefix, a saved view round trip, and the overview charts growing as work runs.

One signed-in page for the whole module (each test starts from the page it needs)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from ffcore import events
from ffcore.execution.client import Client
from ffcore.ids import ExecutionId
from ffcore.worker.worker import Registry, Worker, WorkerConfig
from tests.browser.asgi_server import PASSWORD
from tests.browser.conftest import sign_in

pytestmark = [pytest.mark.browser]


@pytest.fixture(scope="module")
def op_page(browser: Browser, asgi_server) -> Iterator[Page]:
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    p = ctx.new_page()
    p.set_default_timeout(10_000)
    sign_in(p, asgi_server.url, "otto", PASSWORD)
    yield p
    ctx.close()


def _settled() -> None:
    """Earlier writes' pushes are out before a page subscribes (they would refresh it anyway; this keeps the
    test about the change it makes)."""
    events.flush_all()
    time.sleep(0.3)


def test_a_row_changes_state_in_place_within_a_second_and_a_row_leaving_the_filter_is_marked(
        op_page: Page, asgi_server, backend):
    c = Client(backend)
    eid = c.create(kind="row", lane="rows-live").execution_id
    other = c.create(kind="row", lane="rows-live").execution_id
    _settled()
    op_page.goto(f"{asgi_server.url}/executions/?lane=rows-live")
    expect(op_page.locator("body")).to_have_attribute("data-live", "on")
    row = op_page.locator(f'tr[data-eid="{eid}"]')
    expect(row.locator(".badge")).to_have_text("waiting")
    op_page.evaluate("window.__same_page = true")
    worker = Worker(backend, WorkerConfig(lanes=("rows-live",), worker_instance_id="w-rows"), Registry())
    tasks = {t.execution_id: t for t in worker.claim_next(2)}
    expect(row.locator(".badge")).to_have_text("active", timeout=1000)  # pushed: no polling, no reload
    tasks[eid].complete(b"ok")
    expect(row.locator(".badge")).to_have_text("completed", timeout=1000)
    assert op_page.evaluate("window.__same_page") is True
    # On a state filter, a row whose execution moved on stays where it is, marked.
    tasks[other].release()
    c.create(kind="row", lane="rows-live")
    _settled()
    op_page.goto(f"{asgi_server.url}/executions/?lane=rows-live&state=completed")
    expect(op_page.locator("body")).to_have_attribute("data-live", "on")
    done = op_page.locator(f'tr[data-eid="{eid}"]')
    expect(done).not_to_have_class(re.compile("left-filter"))
    c.replay(eid)
    expect(done).to_have_class(re.compile("left-filter"), timeout=1000)
    expect(done).to_contain_text("left the filter")
    expect(done.locator(".badge")).to_have_text("waiting")


def test_the_flow_page_s_count_chips_follow_its_dag(op_page: Page, asgi_server, backend):
    from ffcore.flows.flows import Flows

    flows = Flows(backend)
    fid = flows.create(kind="chips")
    flows.build(fid, [{"kind": "a", "lane": "chips-live"}, {"kind": "b", "lane": "chips-live"}], [])
    _settled()
    op_page.goto(f"{asgi_server.url}/flows/{fid}/")
    expect(op_page.locator("body")).to_have_attribute("data-live", "on")
    expect(op_page.locator('#flow-counts [data-state="waiting"]')).to_contain_text("2")
    op_page.evaluate("window.__same_page = true")
    worker = Worker(backend, WorkerConfig(lanes=("chips-live",), worker_instance_id="w-chips"), Registry())
    for t in worker.claim_next(2):
        t.complete(b"ok")
    expect(op_page.locator('#flow-counts [data-state="completed"]')).to_contain_text("2", timeout=5000)
    expect(op_page.locator('#flow-counts [data-state="waiting"]')).to_have_count(0)
    assert op_page.evaluate("window.__same_page") is True


def test_the_overview_charts_are_drawn_and_grow_as_work_runs(op_page: Page, asgi_server, backend):
    from ffcore.engine import stats

    c = Client(backend)
    worker = Worker(backend, WorkerConfig(lanes=("chart-live",), worker_instance_id="w-chart", concurrency=8),
                    Registry())

    def run(n: int) -> None:
        for _ in range(n):
            c.create(kind="chart", lane="chart-live")
        for t in worker.claim_next(n):
            t.complete(b"ok")
        # What ffscanners' sampler does every 5 s, counting what just ended (no settle time): its backlog sample then
        # lands in this minute, which the page shows (sampling as of now + 1 s put it in the next one a minute's
        # last second, and no backlog line was drawn).
        stats.sample(backend, settle_ms=0)

    run(2)
    _settled()
    op_page.goto(f"{asgi_server.url}/")
    chart = op_page.locator("#chart-throughput")
    expect(chart.locator("svg rect.bar-done").first).to_be_visible()
    before = int(chart.get_attribute("data-total") or 0)
    assert before >= 2
    expect(op_page.locator('#chart-latency tr[data-lane="chart-live"]')).to_contain_text("p50")
    expect(op_page.locator("#chart-backlog polyline").first).to_be_attached()
    expect(op_page.locator("body")).to_have_attribute("data-live", "on")
    op_page.evaluate("window.__same_page = true")
    run(3)
    expect(op_page.locator("#chart-throughput")).to_have_attribute("data-total", str(before + 3), timeout=5000)
    assert op_page.evaluate("window.__same_page") is True


def test_the_execution_page_offers_only_what_the_state_allows(op_page: Page, asgi_server, backend):
    """One browser check of the state x action matrix (every state is crossed server-side in
    tests/dashboard/test_action_offers.py): a completed execution offers replay only, and after the replay
    (now waiting) the page offers cancel and change priority, and neither replay nor revoke."""
    c = Client(backend)
    eid = c.create(kind="offer", lane="offer-live").execution_id
    (t,) = Worker(backend, WorkerConfig(lanes=("offer-live",), worker_instance_id="w-offer"), Registry()).claim_next(1)
    t.complete(b"ok")
    op_page.goto(f"{asgi_server.url}/executions/{eid}/")
    expect(op_page.locator("#actions form.action")).to_have_count(1)
    expect(op_page.locator("#action-replay")).to_be_visible()
    op_page.fill("#action-replay input[name=replay-reason]", "browser matrix")
    op_page.click("#action-replay button[type=submit]")
    expect(op_page.locator("#action-replay .outcome")).to_contain_text("Replayed")
    op_page.goto(f"{asgi_server.url}/executions/{eid}/")
    offered = set((op_page.locator("#actions").get_attribute("data-offered") or "").split())
    assert {"cancel", "priority"} <= offered and not offered & {"replay", "revoke"}
    expect(op_page.locator("#action-priority")).to_be_visible()
    expect(op_page.locator("#action-replay")).to_have_count(0)


def test_search_by_bare_uuid_and_by_prefix_from_the_header_box(op_page: Page, asgi_server, backend):
    c = Client(backend)
    eid = c.create(kind="find", lane="find-live").execution_id
    bare = ExecutionId(eid).uuid
    op_page.goto(f"{asgi_server.url}/executions/")
    op_page.fill("#jump", bare)
    op_page.press("#jump", "Enter")
    op_page.wait_for_url(re.compile(r"/executions/%7Bfp:\d+%7D:" + bare + "/$"))
    expect(op_page.locator("h1")).to_contain_text(bare)
    op_page.fill("#jump", bare[:9])
    op_page.press("#jump", "Enter")
    op_page.wait_for_url(re.compile(r"/search/\?q="))
    expect(op_page.locator("#search-results")).to_contain_text(eid)
    op_page.click(f'#search-results a:has-text("{bare}")')
    op_page.wait_for_url(re.compile(bare + "/$"))
    op_page.fill("#jump", "not-an-id")
    op_page.press("#jump", "Enter")
    expect(op_page.locator('form.filters [data-error="id"]').first).to_contain_text("is not an id")


def test_a_saved_view_round_trip(op_page: Page, asgi_server, backend):
    c = Client(backend)
    mine = c.create(kind="saved", lane="view-live").execution_id
    other = c.create(kind="saved", lane="view-other").execution_id
    op_page.goto(f"{asgi_server.url}/executions/?lane=view-live")
    op_page.fill("#save-view input[name=name]", "my lane")
    op_page.click("#save-view button[type=submit]")
    link = op_page.locator('#saved-views .saved-view[data-view="my lane"] a')
    expect(link).to_be_visible()
    op_page.goto(f"{asgi_server.url}/executions/")
    expect(op_page.locator("#executions")).to_contain_text(other)
    op_page.locator('#saved-views .saved-view[data-view="my lane"] a').click()
    op_page.wait_for_url(re.compile(r"lane=view-live"))
    expect(op_page.locator("#executions")).to_contain_text(mine)
    expect(op_page.locator("#executions")).not_to_contain_text(other)
    op_page.locator('#saved-views .saved-view[data-view="my lane"] button').click()
    expect(op_page.locator('#saved-views .saved-view[data-view="my lane"]')).to_have_count(0)
    op_page.reload()
    expect(op_page.locator("#no-saved-views")).to_be_visible()
