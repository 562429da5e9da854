"""`ffcore.connection.Client` (the typed face of the Valkey client) names only commands both clients have."""

from __future__ import annotations

import redis

from ffcore.connection import Client
from ffcore.failover import FailoverCluster


def test_every_command_of_the_protocol_exists_on_both_clients():
    names = [n for n in vars(Client) if not n.startswith("_")]
    assert "fcall" in names and "pipeline" in names
    for cls in (redis.Redis, FailoverCluster):
        missing = [n for n in names if not callable(getattr(cls, n, None))]
        assert missing == [], (cls.__name__, missing)
