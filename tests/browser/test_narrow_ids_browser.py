"""Issue #36: at a phone's width (390 px) ids stay readable: never one character per line, never wider than
the screen."""

from __future__ import annotations

import pytest
from playwright.sync_api import Browser

from tests.browser.conftest import sign_in
from tests.dashboard_fixtures import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Each element whose own text holds an execution id: its width, and the page's scroll width.
PROBE = r"""() => {
  const out = [];
  for (const el of document.querySelectorAll("body *")) {
    if (!el.offsetParent && el.tagName !== "BODY") continue;
    const own = Array.from(el.childNodes).filter((n) => n.nodeType === 3).map((n) => n.textContent).join("");
    if (!/\{fp:\d+\}:[0-9a-f]{8}-/.test(own)) continue;
    const r = el.getBoundingClientRect();
    out.push({tag: el.tagName + "." + el.className, width: r.width, height: r.height, right: r.right});
  }
  return {els: out, scroll: document.documentElement.scrollWidth};
}"""


def _probe(page):
    return page.evaluate(PROBE)


def test_ids_never_wrap_one_character_per_line_at_390_px(browser: Browser, live_server, operator, seed):
    ctx = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    page = ctx.new_page()
    try:
        sign_in(page, live_server.url, operator.username, PASSWORD)
        pages = (f"/executions/{seed.completed}/", f"/executions/{seed.active}/", "/executions/", "/workers/")
        for path in pages:
            page.goto(live_server.url + path)
            got = _probe(page)
            assert got["els"], path
            for el in got["els"]:
                assert el["width"] >= 120, (path, el)  # ~15 monospace characters a line at least
            assert got["scroll"] <= 390 + 1, (path, got["scroll"])
            if path == "/executions/":  # the list's first column: the whole id on screen
                assert all(el["right"] <= 390 for el in got["els"]), got["els"]
    finally:
        ctx.close()
