"""A throwaway Valkey holding upstream FlowFabric's released v0.15.0 library (test data) and the scenario of
tests/upstream_scenario.py written through it; the dashboard pointed at it, in upstream mode."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ffcore.backend import Backend
from ffcore.embedded import EmbeddedValkey
from ffcore.settings import Settings
from tests import upstream_scenario
from tests.dashboard_fixtures import *  # noqa: F403 - users per role
from tests.upstream_library import upstream_v015_source


@pytest.fixture(scope="module")
def upstream_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedValkey]:
    s = EmbeddedValkey(tmp_path_factory.mktemp("upstream-reads"), persistent=False).start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def upstream_settings(upstream_server: EmbeddedValkey) -> Settings:
    return Settings.from_url(upstream_server.url)


@pytest.fixture
def raw(upstream_settings: Settings) -> Iterator[Any]:
    """A plain client on a flushed server holding only upstream's library."""
    b = Backend.connect(upstream_settings, load=False)
    b.client.flushall()
    b.client.function_flush()
    b.client.function_load(upstream_v015_source())
    yield b.client
    b.close()


@pytest.fixture
def made(raw: Any, upstream_settings: Settings) -> upstream_scenario.Made:
    return upstream_scenario.build(raw, upstream_settings)


@pytest.fixture
def up_backend(raw: Any, upstream_settings: Settings) -> Iterator[Backend]:
    """The dashboard's backend, connected the way `up` connects (it detects upstream mode itself)."""
    from dashboard import backend as dashboard_backend_module

    dashboard_backend_module.reset_backend()
    b = Backend.connect(upstream_settings)
    assert b.upstream is not None
    dashboard_backend_module._backend = b
    yield b
    dashboard_backend_module.reset_backend()


@pytest.fixture
def reconciled(made: upstream_scenario.Made, up_backend: Backend) -> upstream_scenario.Made:
    """The scenario, with the `ff:up:` indexes brought up to date once."""
    from ffcore.upstream.reconcile import reconcile_once

    reconcile_once(up_backend)
    return made
