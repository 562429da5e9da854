"""Budgets in a real browser: a gauge moves after usage is reported, and an operator resets it."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from ffcore.budgets.budgets import create_budget, report_usage
from tests.browser.asgi_server import PASSWORD
from tests.browser.conftest import sign_in

pytestmark = [pytest.mark.browser]


def test_a_gauge_moves_after_usage_is_reported_and_a_reset_brings_it_back(page: Page, asgi_server, backend):
    # daphne (not the WSGI live_server): the gauges arrive pushed over the page's websocket.
    dashboard_backend = backend
    bid, _ = create_budget(dashboard_backend, hard={"tokens": 100}, soft={"tokens": 50})
    sign_in(page, asgi_server.url, "otto", PASSWORD)
    page.goto(f"{asgi_server.url}/budgets/{bid}/")
    row = page.locator(f"#budget-{bid} tr[data-dim='tokens']")
    gauge = row.locator("meter")
    expect(gauge).to_have_attribute("value", "0")
    expect(row).to_have_attribute("data-state", "ok")

    report_usage(dashboard_backend, bid, {"tokens": 60})  # a worker somewhere reports usage
    expect(gauge).to_have_attribute("value", "60")  # pushed: re-rendered on the server; no reload
    expect(row).to_have_attribute("data-state", "soft")

    report_usage(dashboard_backend, bid, {"tokens": 40})
    expect(row).to_have_attribute("data-state", "hard")
    expect(page.locator(f"#budget-{bid}")).to_have_attribute("data-state", "hard")

    form = page.locator("#budget-reset")
    form.locator("button").click()  # the browser refuses: a reason is required
    form.locator("input[name='reset-reason']").fill("new month")
    form.locator("button").click()
    expect(page.locator("#budget-reset .outcome")).to_have_text("Budget reset.")
    expect(gauge).to_have_attribute("value", "0")
    expect(row).to_have_attribute("data-state", "ok")
