"""A Client registers a (lane, partition) in the lane registry once per REGISTERED_TTL_S, not on every
create (issue #21: two SADDs per task for nothing, the registry being never pruned)."""

from __future__ import annotations

from ffcore import keys
from ffcore.execution import client as client_mod
from ffcore.execution.client import Client


def _sadds(backend) -> int:
    stats = backend.client.info("commandstats")
    return int(stats.get("cmdstat_sadd", {}).get("calls", 0))


def test_repeated_creates_register_the_lane_once(backend):
    c = Client(backend)
    c.create(kind="k", lane="reg1")
    assert backend.client.smembers(keys.lane_partitions("reg1"))
    assert b"reg1" in backend.client.smembers(keys.LANES_INDEX)
    before = _sadds(backend)
    for _ in range(5):
        c.create(kind="k", lane="reg1")
    cached = (_sadds(backend) - before) / 5  # the contract create's own SADD in its Lua
    before = _sadds(backend)
    Client(backend).create(kind="k", lane="reg1")  # a new client sends the registry and the lanes index
    assert _sadds(backend) - before == cached + 2


def test_the_registration_is_sent_again_after_its_ttl(backend, monkeypatch):
    c = Client(backend)
    c.create(kind="k", lane="reg2")
    backend.client.delete(keys.lane_partitions("reg2"))  # e.g. a flushed server
    c.create(kind="k", lane="reg2")
    assert not backend.client.exists(keys.lane_partitions("reg2"))  # trusted within the TTL
    monkeypatch.setattr(client_mod, "REGISTERED_TTL_S", 0.0)
    c.create(kind="k", lane="reg2")
    assert backend.client.smembers(keys.lane_partitions("reg2"))


def test_a_new_client_registers_on_its_first_create(backend):
    Client(backend).create(kind="k", lane="reg3")
    backend.client.delete(keys.lane_partitions("reg3"))
    Client(backend).create(kind="k", lane="reg3")
    assert backend.client.smembers(keys.lane_partitions("reg3"))
