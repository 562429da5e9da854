"""The upstream-mode badge in Chromium at 1280 px (issue #40 item 1): a daphne on a Valkey holding upstream's
v0.15.0 library shows which release it operates in the top bar, in one line, inside the viewport, with the bar's
own type — and nothing of the bar overflows."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from ffcore.embedded import EmbeddedValkey
from tests.browser.asgi_server import PASSWORD, AsgiServer, start
from tests.browser.conftest import sign_in
from tests.upstream_scenario import *  # noqa: F403 - the deployment's fixtures

pytestmark = [pytest.mark.browser]


@pytest.fixture(scope="module")
def upstream_site(tmp_path_factory: pytest.TempPathFactory, upstream_server: EmbeddedValkey) -> Iterator[AsgiServer]:
    server = start(tmp_path_factory.mktemp("asgi-upstream"), upstream_server.url)
    yield server
    server.stop()


def test_the_top_bar_names_the_upstream_release_in_one_line_without_overflow_at_1280px(page: Page, upstream_site):
    sign_in(page, upstream_site.url, "otto", PASSWORD)
    page.goto(upstream_site.url + "/audit/")
    badge = page.locator("#upstream-mode")
    expect(badge).to_have_text("Operating upstream FlowFabric v0.14–v0.15 (ff_version 34)")
    box = badge.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 1280
    size = page.evaluate("parseFloat(getComputedStyle(document.getElementById('upstream-mode')).fontSize)")
    assert box["height"] < 2 * size  # one line (with its border and padding), not two
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    for sel in (".brand", ".nav", ".jump", ".who"):  # every bar item still inside the viewport
        b = page.locator(f".topbar {sel}").bounding_box()
        assert b is not None and b["x"] + b["width"] <= 1280, sel
    same_font = page.evaluate("""getComputedStyle(document.getElementById('upstream-mode')).fontFamily ===
                                 getComputedStyle(document.querySelector('.nav a')).fontFamily""")
    assert same_font
