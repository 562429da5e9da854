"""A local 3-primary Valkey Cluster per test module, and a flushed cluster-client backend per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ffcore.backend import Backend
from ffcore.embedded import EmbeddedCluster
from ffcore.settings import Settings


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
