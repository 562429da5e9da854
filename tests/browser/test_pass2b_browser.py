"""Issue #25 part B in Chromium: bulk signal from the inbox and its one audit row (with a filter), a stale worker;
the attempt diff, the dark/light toggle remembered per user (and the JSON viewer light in light mode)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from ffcore import keys
from ffcore.execution.client import Client
from ffcore.suspension import hmac_secrets
from ffcore.worker.heartbeat import Heartbeat
from ffcore.worker.worker import Registry, Worker, WorkerConfig
from tests.browser.conftest import sign_in
from tests.dashboard_fixtures import PASSWORD
from tests.ffcore.suspension_support import SECRET, claimed

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_bulk_signal_then_one_audit_row_with_filters_and_a_stale_worker(page: Page, live_server, operator,
                                                                         dashboard_backend):
    hmac_secrets.install(dashboard_backend, SECRET)
    waiting = []
    for _ in range(3):
        t = claimed(dashboard_backend, kind="approve", lane="approvals")
        waiting.append((t.execution_id, t.suspend("approved", timeout_ms=600_000).waitpoint_id))
    c = Client(dashboard_backend)
    sign_in(page, live_server.url, operator.username, PASSWORD)
    page.goto(live_server.url + "/waitpoints/")
    for _eid, wid in waiting[:2]:
        page.locator(f"#wp-{wid} input[type=checkbox]").check()
    page.click("#bulk-signal summary")
    expect(page.locator("#bulk-signal-form input[name=name]")).to_have_value("")
    page.fill("#bulk-signal-form input[name=name]", "approved")
    page.fill("#bulk-signal-form input[name=reason]", "approved in the standup")
    page.click("#wp-bulk-preview")
    expect(page.locator("#wp-bulk [data-count]")).to_have_text("2")
    assert {c.get_state(e) for e, _ in waiting} == {"suspended"}  # the preview delivered nothing
    page.click("#wp-bulk-confirm")
    expect(page.locator(".bulk-finished")).to_be_visible()
    expect(page.locator("#bulk-results")).to_contain_text("resume")
    assert [c.get_state(e) for e, _ in waiting] == ["waiting", "waiting", "suspended"]

    page.goto(live_server.url + "/audit/")
    job_row = page.locator("#audit tr.bulk-row")
    expect(job_row).to_have_count(1)
    expect(job_row.locator("[data-count]")).to_have_text("2")
    expect(job_row).to_contain_text("2 ok")
    page.fill("#audit-filters input[name=action]", "cancel")
    page.click("#audit-filters button")
    expect(page.locator("#audit")).to_contain_text("No entries match")
    page.fill("#audit-filters input[name=action]", "bulk_signal")
    page.fill("#audit-filters input[name=actor]", operator.username)
    page.click("#audit-filters button")
    expect(page.locator("#audit tr.bulk-row")).to_have_count(1)
    assert page.locator("#audit-filters input[name=tz]").input_value() != ""  # the browser's zone went along
    page.locator("#audit tr.bulk-row a").click()
    expect(page.locator(".bulk-finished")).to_be_visible()

    # A worker whose heartbeat is late is listed as stale, with its lease.
    eid = waiting[2][0]
    hb = Heartbeat(dashboard_backend, worker_id="stuck", wiid="wi-stuck", lanes=("default",), capabilities_csv="",
                   concurrency=2, interval_ms=1000, lease_ttl_ms=30_000)
    hb.register()
    hb.beat([eid])
    late = str(dashboard_backend.now_ms() - 30_000)
    dashboard_backend.client.hset(keys.worker("wi-stuck"), "last_heartbeat_at", late)
    page.goto(live_server.url + "/workers/")
    row = page.locator("#wi-stuck")
    expect(row).to_have_attribute("data-status", "stale")
    expect(row).to_contain_text("since")
    expect(row.locator("a.mono")).to_have_text(eid)


def test_attempt_diff_and_the_theme_toggle_remembered_per_user(page: Page, browser, live_server, operator, viewer,
                                                              dashboard_backend):
    c = Client(dashboard_backend)
    eid = c.create(kind="job", payload=b'{"user": "ann"}').execution_id
    (t,) = Worker(dashboard_backend, WorkerConfig(worker_instance_id="w-b1", worker_id="alpha"),
                  Registry()).claim_next(1)
    for line in ("start", "boom"):
        t.append_frame("log", line)
    t.fail("tool crashed", "tool")
    c.replay(eid)
    (t,) = Worker(dashboard_backend, WorkerConfig(worker_instance_id="w-b2", worker_id="beta"),
                  Registry()).claim_next(1)
    for line in ("start", "done"):
        t.append_frame("log", line)
    t.complete()

    sign_in(page, live_server.url, operator.username, PASSWORD)
    page.goto(f"{live_server.url}/executions/{eid}/")
    expect(page.locator("#attempts [data-duration]")).to_have_count(2)
    page.click("#attempts a.diff-link")
    expect(page).to_have_url(re.compile(r"/attempts/diff\?a=0&b=1$"))
    worker_row = page.locator("#diff-facts tr[data-fact=worker]")
    expect(worker_row).to_have_class("changed")
    expect(worker_row).to_contain_text("alpha")
    expect(worker_row).to_contain_text("beta")
    expect(page.locator("#diff-lines tr.d-replace")).to_contain_text("boom")
    expect(page.locator("#diff-lines tr.d-equal")).to_contain_text("start")
    # Times read in the browser's zone; the raw value stays in the tooltip.
    started = page.locator("#diff-facts tr[data-fact=started] time").first
    expect(started).to_have_attribute("data-local", "1")
    expect(started).to_have_attribute("title", re.compile(r"^\d{13} ms · "))
    # So do a stream's frame times (and the live ones a page script adds).
    page.goto(f"{live_server.url}/executions/{eid}/attempts/1/stream/")
    frame_time = page.locator("#frames li.frame .ftime").first
    expect(frame_time).to_have_attribute("data-local", "1")
    expect(frame_time).to_have_attribute("title", re.compile(r"^\d{13} ms · \d\d:\d\d:\d\d\.\d{3} UTC$"))

    # The toggle cycles system → dark → light → system; each choice is remembered per user.
    root = page.locator("html")
    expect(root).to_have_attribute("data-theme-pref", "auto")
    os_theme = root.get_attribute("data-theme")  # the browser's own preference
    page.click("#theme-toggle")
    expect(root).to_have_attribute("data-theme-pref", "dark")
    expect(root).to_have_attribute("data-theme", "dark")
    page.goto(f"{live_server.url}/executions/{eid}/")
    expect(root).to_have_attribute("data-theme-pref", "dark")  # remembered
    expect(page.locator("#input .jsontree")).to_have_css("background-color", "rgb(11, 15, 19)")
    page.click("#theme-toggle")
    expect(root).to_have_attribute("data-theme", "light")
    # The JSON viewer follows: a light box in light mode, the dark one in dark mode.
    tree = page.locator("#input .jsontree")
    expect(tree).to_have_css("background-color", "rgb(255, 255, 255)")
    page.click("#theme-toggle")  # back to following the system, and that is remembered too
    expect(root).to_have_attribute("data-theme-pref", "auto")
    expect(root).to_have_attribute("data-theme", os_theme or "")
    expect(page.locator("#theme-toggle")).to_have_attribute("title", re.compile("follows the system"))
    page.goto(f"{live_server.url}/executions/{eid}/")
    expect(root).to_have_attribute("data-theme-pref", "auto")
    expect(page.locator("#theme-toggle")).to_have_attribute("value", "dark")
    # Another user in a fresh browser context keeps the default (follows the OS: dark in headless Chromium).
    ctx = browser.new_context(viewport={"width": 1280, "height": 900}, color_scheme="dark")
    p2 = ctx.new_page()
    sign_in(p2, live_server.url, viewer.username, PASSWORD)
    expect(p2.locator("html")).to_have_attribute("data-theme", "dark")
    ctx.close()
