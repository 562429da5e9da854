"""What idle workers cost the server: a fleet probes the partition ring once per interval (not once per
worker), a ring find is registered for the whole fleet, a capable worker does not re-examine a lane's
heads that are all indexed for other capabilities (an idle driver's sleep: tests/ffcore/test_driver.py)."""

from __future__ import annotations

import time

from ffcore import keys
from ffcore.backend import Backend
from ffcore.execution.client import Client
from ffcore.ids import ExecutionId
from ffcore.policy import Policy
from ffcore.worker import claiming
from ffcore.worker.worker import Registry, Worker, WorkerConfig

from .invariants import core
from .workerkit import running


def server_calls(backend: Backend, command: str) -> int:
    return int(backend.client.info("commandstats").get(f"cmdstat_{command}", {}).get("calls", 0))


def foreign_create(backend: Backend, lane: str, **kw) -> ExecutionId:
    """An execution created by another client (the raw FCALL): no lane registry entry, no index entry."""
    call = Client(backend).create_call(kind="k", lane=lane, payload=b"", **kw)
    return ExecutionId(str(backend.call(call)[0]))


def test_one_worker_of_a_fleet_probes_the_ring_per_interval(backend):
    a = Worker(backend, WorkerConfig(lanes=("ri",), concurrency=2), Registry())
    b = Worker(backend, WorkerConfig(lanes=("ri",), concurrency=2), Registry())
    backend.client.config_resetstat()
    assert a.claim_next(2) == []
    partitions = backend.settings.partitions.flow
    assert server_calls(backend, "zrangebyscore") >= partitions  # a probed every partition
    assert backend.client.get(keys.ring_turn("claim", ("ri",))) == a.config.worker_instance_id.encode()
    backend.client.config_resetstat()
    assert b.claim_next(2) == []
    assert server_calls(backend, "zrangebyscore") == 0  # a took this interval's turn
    # A fleet serving other lanes has its own turn.
    other = Worker(backend, WorkerConfig(lanes=("ri", "rj"), concurrency=2), Registry())
    backend.client.config_resetstat()
    assert other.claim_next(2) == []
    assert server_calls(backend, "zrangebyscore") >= partitions


def test_reclaim_ring_probes_are_shared_by_the_fleet_too(backend):
    a = Worker(backend, WorkerConfig(lanes=("rr",), concurrency=2), Registry())
    b = Worker(backend, WorkerConfig(lanes=("rr",), concurrency=2), Registry())
    a.claimer._reclaim_ring_at = b.claimer._reclaim_ring_at = float("-inf")  # both due for the ring
    backend.client.config_resetstat()
    assert a.reclaim(2) == []
    assert server_calls(backend, "zrangebyscore") >= 2 * backend.settings.partitions.flow
    backend.client.config_resetstat()
    assert b.reclaim(2) == []
    assert server_calls(backend, "zrangebyscore") == 0  # no registry, and a holds the turn


def test_a_ring_find_is_registered_for_the_fleet(backend):
    eid = foreign_create(backend, "rf")
    assert not backend.client.smembers(keys.lane_partitions("rf"))
    w = Worker(backend, WorkerConfig(lanes=("rf",), concurrency=2), Registry())
    (t,) = w.claim_next(2)
    assert t.execution_id == eid
    assert backend.client.smembers(keys.lane_partitions("rf")) == {str(eid.partition_index).encode()}
    # Found by a worker that cannot run it, work still reaches a capable one through the registry.
    gpu_work = foreign_create(backend, "rg", policy=Policy(required_capabilities=("gpu",)))
    cpu = Worker(backend, WorkerConfig(lanes=("rg",), capabilities=("cpu",), concurrency=2), Registry())
    assert cpu.claim_next(2) == []  # took the ring turn; the contract path route-blocks what it cannot run
    assert str(gpu_work.partition_index).encode() in backend.client.smembers(keys.lane_partitions("rg"))


def test_a_capable_worker_does_not_reexamine_heads_indexed_for_others(backend, monkeypatch):
    c = Client(backend)
    gpu = [c.create(kind="k", lane="rb", policy=Policy(required_capabilities=("gpu",))).execution_id
           for _ in range(5)]
    cpu = Worker(backend, WorkerConfig(lanes=("rb",), capabilities=("cpu",), concurrency=1), Registry())
    cpu.claimer._ring_at = cpu.claimer._reclaim_ring_at = time.monotonic()  # ring probes not due
    backend.client.config_resetstat()
    assert cpu.claim_next(1) == []
    examined = server_calls(backend, "hmget")
    assert examined >= 5  # the first look read every head
    backend.client.config_resetstat()
    for _ in range(5):
        assert cpu.claim_next(1) == []
    assert server_calls(backend, "hmget") == 0 and server_calls(backend, "fcall") == 0
    # Plain work arriving behind them is claimed once the lane is looked at again.
    monkeypatch.setattr(claiming, "BARREN_TTL_S", 0.05)
    plain = c.create(kind="k", lane="rb").execution_id
    time.sleep(0.06)
    (t,) = cpu.claim_next(1)
    assert t.execution_id == plain
    assert all(core(backend, e)["public_state"] == "waiting" for e in gpu)  # left alone, never route-blocked


def test_a_listening_idle_worker_polls_at_its_listening_interval(backend):
    # Issue #21: hints and hand-offs bring a listening worker its work at once, so its polls (a probe round trip
    # each) only catch what a lost hint left: once a second here, not every poll_interval_ms.
    polls = {"listening": 0, "short": 0}
    workers = {}
    for name, listening_ms in (("listening", 600), ("short", 100)):
        w = Worker(backend, WorkerConfig(lanes=("lp",), concurrency=2, poll_interval_ms=100,
                                         listening_poll_interval_ms=listening_ms), Registry())
        real = w.claimer.claim

        def spy(n: int, name: str = name, real=real):
            polls[name] += 1
            return real(n)

        w.claimer.claim = spy
        workers[name] = w
    with running(list(workers.values())):
        time.sleep(1.5)  # past the back-off from 5 ms
        before = dict(polls)
        time.sleep(2.4)
        listening, short = polls["listening"] - before["listening"], polls["short"] - before["short"]
        assert 2 <= listening <= 6, listening  # ≈ 4 (every 0.6 s)
        assert short >= 2 * listening, (short, listening)  # ≈ 24 (every 0.1 s)
