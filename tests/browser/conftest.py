"""Browser fixtures: Playwright driving Debian's chromium (never a downloaded browser)."""


from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from ffcore.embedded import EmbeddedValkey
from tests.browser.asgi_server import AsgiServer, start
from tests.browser.foreign_site import attacker_site  # noqa: F401 - a page on another port, for the cross-origin tests
from tests.dashboard_fixtures import *  # noqa: F403 - users and the seeded dataset

# Playwright's sync API runs an event loop in this thread; the ORM calls in fixtures are still sync.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic", "--disable-dev-shm-usage"]


def chromium_path() -> str:
    path = os.environ.get("FF_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not os.path.exists(path):
        pytest.fail("Debian's chromium is not installed (apt-get install -y chromium); browser tests need it")
    return path


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    # One Chromium for the session: sync_playwright keeps an event loop running in this thread while it is
    # open, which would break a later test calling asyncio.run(), so tests/conftest.py runs the browser
    # tests last.
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=chromium_path(), headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="session")
def asgi_server(tmp_path_factory: pytest.TempPathFactory, valkey_server: EmbeddedValkey) -> Iterator[AsgiServer]:
    """One daphne for every module: its state is the test Valkey (flushed by `backend` before each test) and
    a database holding only the two users (no module leaves a row another one reads)."""
    server = start(tmp_path_factory.mktemp("asgi"), valkey_server.url)
    yield server
    server.stop()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    p = ctx.new_page()
    p.set_default_timeout(10_000)
    yield p
    ctx.close()


def sign_in(page: Page, base: str, username: str, password: str) -> None:
    page.goto(base + "/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(base + "/")
