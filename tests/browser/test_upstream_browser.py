"""The main pages, walked once in Chromium, against a deployment upstream's v0.15.0 library wrote (issue #40):
a daphne of its own pointed at that Valkey, which it detects and operates in upstream mode."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from ffcore import events
from ffcore.backend import Backend
from ffcore.embedded import EmbeddedValkey
from ffcore.ids import ExecutionId
from ffcore.settings import Settings
from ffcore.upstream.reconcile import Reconciler
from tests import upstream_scenario
from tests.browser.asgi_server import PASSWORD, AsgiServer
from tests.browser.conftest import sign_in
from tests.upstream_scenario import *  # noqa: F403 - the deployment's fixtures

pytestmark = [pytest.mark.browser]


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory, upstream_server: EmbeddedValkey,
               upstream_settings: Settings) -> Iterator[tuple[AsgiServer, upstream_scenario.Made, Any]]:
    with upstream_scenario.served(tmp_path_factory.mktemp("upstream-asgi"), upstream_server, upstream_settings) as got:
        yield got


def test_the_main_pages_show_upstreams_data_in_a_browser(page: Page, deployment):
    asgi, m, raw = deployment
    digest = upstream_scenario.code_digest(raw)
    base = asgi.url
    sign_in(page, base, "vera", PASSWORD)
    expect(page.locator("main")).to_be_visible()

    page.goto(base + "/executions/")
    rows = page.locator("tr[data-eid]")
    expect(rows.first).to_be_visible()
    assert rows.count() == len(m.executions())
    href = page.locator(f"tr[data-eid='{m.running}']").get_attribute("data-href")
    assert href
    page.goto(base + href)
    expect(page.locator("body")).to_contain_text("llm")

    page.goto(f"{base}/flows/")
    page.locator(f"a[href*='{m.flow_id}']").first.click()
    expect(page.locator("#edge-group-table")).to_contain_text("any of 2")

    page.goto(f"{base}/waitpoints/")
    expect(page.locator("body")).to_contain_text("approve")
    page.goto(f"{base}/workers/")
    expect(page.locator("body")).to_contain_text(upstream_scenario.WIID)
    page.goto(f"{base}/budgets/")
    expect(page.locator("body")).to_contain_text(m.budget_id)
    page.goto(f"{base}/executions/{m.running}/attempts/0/stream/")
    expect(page.locator("body")).to_contain_text("tok2")
    expect(page.locator("#stream-modes")).to_contain_text("summary")
    assert m.fence is not None
    expect(page.locator("#stream")).to_have_attribute("data-connected", "1")
    upstream_scenario.append(raw, m.running, m.fence, "late-frame")  # the live tail follows upstream's stream
    expect(page.locator("#frames")).to_contain_text("late-frame")
    assert upstream_scenario.code_digest(raw) == digest


def test_the_overview_follows_upstreams_changes_through_the_reconcilers_hints(page: Page, deployment):
    asgi, _m, raw = deployment
    settings = Settings.from_url(asgi.env["FF_VALKEY_URL"])
    b = Backend.connect(settings)
    r = Reconciler(b)
    r.tick()  # learns where things stand
    sign_in(page, asgi.url, "vera", PASSWORD)
    waiting = page.locator("#state-counts td[data-lane='default'][data-col='0']")
    before = int(waiting.inner_text())
    upstream_scenario.create(raw, ExecutionId.mint(9))  # upstream publishes nothing on a create
    r.tick()
    events.flush_all()
    expect(waiting).to_have_text(str(before + 1))  # pushed by the relay: no reload
    b.close()
