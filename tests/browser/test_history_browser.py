"""Issue #36 items 1-2 in Chromium: a failed demo execution's page shows its History and, collapsed under the
error, the traceback its handler raised; the API's /history returns the entries the page lists."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from dashboard.demo import handlers as demo_handlers
from ffcore.execution.client import Client
from ffcore.worker.worker import Worker, WorkerConfig, registry
from tests.browser.conftest import sign_in
from tests.dashboard_fixtures import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_failed_demo_execution_shows_its_history_and_traceback(page: Page, live_server, viewer, dashboard_backend):
    assert registry.get("validate") is demo_handlers.validate  # the demo's failing handler, as `up --demo` runs it
    eid = str(Client(dashboard_backend).create(kind="validate", payload=b'{"amount": "12,00"}').execution_id)
    w = Worker(dashboard_backend, WorkerConfig(worker_instance_id="w-demo-hist", worker_id="demo"))
    (t,) = w.claim_next(1)
    w.execute(t)
    assert Client(dashboard_backend).get_state(eid) == "failed"

    sign_in(page, live_server.url, viewer.username, PASSWORD)
    page.goto(f"{live_server.url}/executions/{eid}/")
    section = page.locator("#history")
    expect(section.locator("h2")).to_contain_text("History")
    rows = section.locator("tbody tr")
    expect(rows.first).to_have_attribute("data-kind", "created")
    expect(rows.last).to_have_attribute("data-kind", "failed")
    expect(section.locator('tr[data-kind="claimed"]')).to_contain_text("w-demo-hist")
    expect(section.locator('tr[data-kind="failed"]')).to_contain_text("schema mismatch")
    stamp = rows.first.locator("time.ts")
    assert stamp.get_attribute("data-ms", timeout=2000).isdigit()  # raw value on hover (title), local text

    tb = page.locator("#attempts details.traceback")
    expect(tb.locator("pre")).not_to_be_visible()  # collapsed
    tb.locator("summary").click()
    expect(tb.locator("pre")).to_be_visible()
    expect(tb.locator("pre")).to_contain_text("Traceback (most recent call last)")
    expect(tb.locator("pre")).to_contain_text("ValueError: schema mismatch: field 'amount' is not a number")

    api = page.request.get(f"{live_server.url}/v1/executions/{eid}/history").json()
    assert [e["kind"] for e in api["entries"]] == [rows.nth(i).get_attribute("data-kind")
                                                   for i in range(rows.count())]
