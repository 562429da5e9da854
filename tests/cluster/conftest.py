"""A local 3-primary Valkey Cluster per test module, a flushed cluster-client backend per test, and a
3-primary + 3-replica cluster per test for the failover tests (they kill a primary)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ffcore.backend import Backend
from ffcore.embedded import EmbeddedCluster
from ffcore.settings import Settings
from tests.dashboard_fixtures import *  # noqa: F403 - signed-in clients for the pages-during-failover test


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    c = EmbeddedCluster(tmp_path_factory.mktemp("cluster")).start()
    yield c
    c.stop()


@pytest.fixture
def cbackend(cluster: EmbeddedCluster) -> Iterator[Backend]:
    b = Backend.connect(Settings.from_url(cluster.url))
    b.client.flushall(target_nodes="primaries")
    yield b
    b.close()


#: In `ha_cluster`: node 0 is the primary of slots 0-5460 (the node the cluster URL names); nodes 3, 4, 5
#: replicate primaries 0, 1, 2.
KILLED = 0
KILLED_SLOTS = range(0, 5461)
KILLED_REPLICA = 3


@pytest.fixture
def ha_cluster(tmp_path: Path) -> Iterator[EmbeddedCluster]:
    c = EmbeddedCluster(tmp_path / "ha", replicas=1, node_timeout_ms=1000).start()
    try:
        yield c
    finally:
        c.stop()
