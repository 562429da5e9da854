"""Issue #36: the overview charts' axis labels and bar tooltips, and a schedule's history bars, read in the viewer's
zone, like the tables."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
from playwright.sync_api import Browser, expect

from ffcore.engine import stats
from ffcore.engine.schedule_scanner import ScheduleScanner
from ffcore.execution.client import Client
from ffcore.worker.worker import Registry, Worker, WorkerConfig
from tests.browser.conftest import sign_in
from tests.dashboard_fixtures import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ZONE = "Asia/Kolkata"  # UTC+05:30 all year: its hours and minutes never match UTC's


def _local(ms: str, fmt: str = "%H:%M") -> str:
    return datetime.fromtimestamp(int(ms) / 1000, tz=ZoneInfo(ZONE)).strftime(fmt)


def test_chart_axes_and_bar_tooltips_are_in_the_viewers_zone(browser: Browser, live_server, operator,
                                                               dashboard_backend):
    c = Client(dashboard_backend)
    c.create(kind="chart", lane="default")
    (t,) = Worker(dashboard_backend, WorkerConfig(worker_instance_id="w-tz"), Registry()).claim_next(1)
    t.complete()
    stats.sample(dashboard_backend, settle_ms=0)
    ctx = browser.new_context(viewport={"width": 1280, "height": 900}, timezone_id=ZONE)
    page = ctx.new_page()
    try:
        sign_in(page, live_server.url, operator.username, PASSWORD)
        ticks = page.locator("#chart-throughput text.tick[data-ms]")
        expect(ticks).to_have_count(2)
        for i in range(2):
            tick = ticks.nth(i)
            expect(tick).to_have_attribute("data-local", "1")
            expect(tick).to_have_text(f"{_local(tick.get_attribute('data-ms') or '0')} GMT+5:30")
            assert "UTC" not in (tick.text_content() or "")
        expect(page.locator("#chart-backlog text.tick[data-local]")).to_have_count(2)
        bar = page.locator("#chart-throughput rect.bar-done title").first
        expect(bar).to_have_text(f"{_local(bar.get_attribute('data-ms') or '0')} GMT+5:30: 1 completed, 0 failed")
    finally:
        ctx.close()


def test_a_schedules_history_bar_tooltips_are_in_the_viewers_zone(browser: Browser, live_server, operator,
                                                                  dashboard_backend):
    s = Client(dashboard_backend).schedules.create(name="tz-tick", kind="beat", interval_ms=60_000)
    assert ScheduleScanner(dashboard_backend).tick(now_ms=s.next_fire_at) == 1
    ctx = browser.new_context(viewport={"width": 1280, "height": 900}, timezone_id=ZONE)
    page = ctx.new_page()
    try:
        sign_in(page, live_server.url, operator.username, PASSWORD)
        page.goto(f"{live_server.url}/schedules/{s.id}/")
        bar = page.locator("#history-chart .bar")
        expect(bar).to_have_count(1)
        expect(bar).to_have_attribute("data-local", "1")
        fired = bar.get_attribute("data-ms") or "0"
        assert fired == str(s.next_fire_at)
        # Fires can be days apart, so the tooltip names the day as well as the time, in the viewer's zone.
        expect(bar).to_have_attribute("title", f"{_local(fired, '%Y-%m-%d %H:%M:%S')} GMT+5:30: waiting")
        assert "UTC" not in (bar.get_attribute("title") or "") and fired not in (bar.get_attribute("title") or "")
    finally:
        ctx.close()
