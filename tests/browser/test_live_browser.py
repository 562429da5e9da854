"""Live pages in a real browser against daphne: a worker's frames appear on the tail page as they are
appended, and pushed state changes reach the list and the detail page without a reload."""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import Page, expect

from ffcore import events
from ffcore.execution.client import Client
from ffcore.worker.worker import Registry, Worker, WorkerConfig
from tests.browser.asgi_server import PASSWORD
from tests.browser.conftest import sign_in

pytestmark = [pytest.mark.browser]


@pytest.fixture
def viewer_page(page: Page, asgi_server) -> Page:
    sign_in(page, asgi_server.url, "vera", PASSWORD)
    return page


def _task(backend):
    Client(backend).create(kind="llm")
    (t,) = Worker(backend, WorkerConfig(worker_instance_id="w-live"), Registry()).claim_next(1)
    return t


def test_a_worker_s_frames_appear_on_the_open_tail_page(viewer_page: Page, asgi_server, backend):
    task = _task(backend)
    for n in range(40):
        task.append_frame("token", f"word {n}")
    viewer_page.goto(f"{asgi_server.url}/executions/{task.execution_id}/attempts/0/stream/")
    frames = viewer_page.locator("#frames li.frame")
    expect(frames).to_have_count(40)
    expect(viewer_page.locator("#stream")).to_have_attribute("data-connected", "1")
    task.append_frame("log", "<img src=x onerror=alert(1)>")
    expect(frames).to_have_count(41)
    expect(frames.last).to_contain_text("<img src=x onerror=alert(1)>")  # shown as text, never as markup
    expect(viewer_page.locator("#frames img")).to_have_count(0)
    # Scrolled up, the page stops following and offers to follow again.
    viewer_page.locator("#stream").evaluate("el => { el.scrollTop = 0; el.dispatchEvent(new Event('scroll')); }")
    task.append_frame("token", "while reading")
    expect(frames).to_have_count(42)
    expect(viewer_page.locator("#follow")).to_be_visible()
    assert viewer_page.locator("#stream").evaluate("el => el.scrollTop") == 0
    task.complete()
    expect(viewer_page.locator("#stream-closed")).to_contain_text("attempt_success")
    expect(viewer_page.locator("#stream-state")).to_have_text("closed")


def test_list_and_detail_pages_update_without_a_reload(viewer_page: Page, asgi_server, backend):
    c = Client(backend)
    waiting = c.create(kind="report").execution_id
    events.flush_all()
    time.sleep(0.3)  # that creation's own push is over before the page subscribes
    viewer_page.goto(f"{asgi_server.url}/executions/")
    expect(viewer_page.locator("#executions")).to_contain_text(waiting)
    expect(viewer_page.locator("body")).to_have_attribute("data-live", "on")
    fresh = c.create(kind="report").execution_id
    banner = viewer_page.locator("#executions-new")
    expect(banner).to_be_visible()
    expect(banner.locator("[data-live-count]")).to_have_text("1")
    expect(viewer_page.locator("#executions")).not_to_contain_text(fresh)  # rows do not jump
    viewer_page.evaluate("window.__same_page = true")
    banner.locator("a").click()
    expect(viewer_page.locator("#executions")).to_contain_text(fresh)
    expect(banner).to_be_hidden()
    assert viewer_page.evaluate("window.__same_page") is True  # the row appeared without a reload

    viewer_page.goto(f"{asgi_server.url}/executions/{waiting}/")
    expect(viewer_page.locator("#public-state")).to_have_text("waiting")
    expect(viewer_page.locator("body")).to_have_attribute("data-live", "on")
    tasks = Worker(backend, WorkerConfig(worker_instance_id="w-live2"), Registry()).claim_next(2)
    assert {t.execution_id for t in tasks} == {waiting, fresh}
    expect(viewer_page.locator("#public-state")).to_have_text("active")
    next(t for t in tasks if t.execution_id == waiting).complete()
    expect(viewer_page.locator("#public-state")).to_have_text("completed")


def test_a_dag_node_changes_colour_without_a_reload(viewer_page: Page, asgi_server, backend):
    from ffcore.flows.flows import Flows

    flows = Flows(backend)
    fid = flows.create(kind="live")
    first, second = flows.build(fid, [{"kind": "step", "lane": "dag-live"}, {"kind": "step", "lane": "dag-live"}],
                                [(0, 1)])
    events.flush_all()
    viewer_page.goto(f"{asgi_server.url}/flows/{fid}/")
    node = viewer_page.locator(f'g.node[data-eid="{first}"]')
    expect(node).to_have_class("node n-waiting")
    expect(viewer_page.locator("body")).to_have_attribute("data-live", "on")
    viewer_page.evaluate("window.__same_page = true")
    (task,) = Worker(backend, WorkerConfig(lanes=("dag-live",), worker_instance_id="w-dag"), Registry()).claim_next(1)
    assert task.execution_id == first
    # Pushed (the safety poll is 10 s): the colour changes well before it.
    expect(node).to_have_class("node n-active", timeout=5000)
    task.complete()
    expect(node).to_have_class("node n-completed", timeout=5000)
    assert viewer_page.evaluate("window.__same_page") is True
    assert second


def test_the_waitpoints_inbox_shows_a_new_suspension_without_a_reload(viewer_page: Page, asgi_server,
                                                                      backend):
    from ffcore.suspension import hmac_secrets

    hmac_secrets.install(backend, "ab" * 16)
    eid = Client(backend).create(kind="approve", lane="inbox-live").execution_id
    events.flush_all()
    viewer_page.goto(f"{asgi_server.url}/waitpoints/")
    expect(viewer_page.locator("body")).to_have_attribute("data-live", "on")
    expect(viewer_page.locator("#waitpoint-rows")).not_to_contain_text(eid)
    viewer_page.evaluate("window.__same_page = true")
    worker = Worker(backend, WorkerConfig(lanes=("inbox-live",), worker_instance_id="w-inbox"), Registry())
    (task,) = worker.claim_next(1)
    task.suspend("approved", timeout_ms=60_000)
    expect(viewer_page.locator("#waitpoint-rows")).to_contain_text(eid, timeout=5000)
    assert viewer_page.evaluate("window.__same_page") is True
