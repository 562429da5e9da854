"""The index reconciler registers executions created by other clients of the library (no ffcore create):
listing index, lane registry and a wake hint; and the delayed promoter wakes the lane it promotes on."""

from __future__ import annotations

import time

from ffcore import keys, wake
from ffcore.engine.delayed import DelayedPromoter
from ffcore.engine.index_reconciler import IndexReconciler
from ffcore.execution.client import Client
from ffcore.execution.listing import Query, list_executions
from ffcore.ids import ExecutionId
from ffcore.keys import PartitionKeys
from ffcore.reads import text
from ffcore.worker.worker import Registry, Worker, WorkerConfig
from tests.pubsub_support import confirmed_pubsub

from .invariants import core


def foreign_create(backend, lane: str) -> ExecutionId:
    """What another client does: the contract's create only."""
    return ExecutionId(str(backend.call(Client(backend).create_call(kind="foreign", lane=lane, payload=b""))[0]))


def test_a_foreign_execution_is_listed_registered_and_announced(backend):
    eid = foreign_create(backend, "fx")
    n = eid.partition_index
    assert backend.client.zscore(PartitionKeys(n).created, str(eid)) is None
    ps = confirmed_pubsub(backend.client, keys.lane_wake("fx"))
    try:
        scanner = IndexReconciler(backend, batch=50)
        assert scanner.tick() == 1
        msg = ps.get_message(timeout=2.0)
    finally:
        ps.close()
    assert backend.client.zscore(PartitionKeys(n).created, str(eid)) == float(core(backend, eid)["created_at"])
    assert text(n) in {text(x) for x in backend.client.smembers(keys.lane_partitions("fx"))}
    assert b"fx" in backend.client.smembers(keys.LANES_INDEX)
    assert msg is not None and wake.parse(msg["data"]) == [n]
    assert scanner.tick() == 0  # idempotent: nothing missing any more
    rows = list_executions(backend, Query(limit=10), ["fx"]).rows
    assert [r["execution_id"] for r in rows] == [str(eid)]


def test_a_worker_finds_foreign_work_through_the_registry_once_reconciled(backend):
    w = Worker(backend, WorkerConfig(lanes=("fy",), concurrency=1), Registry())
    assert w.claim_next(1) == []  # its ring probe ran now: the next one is seconds away
    eid = foreign_create(backend, "fy")
    w.claimer._registry_at = float("-inf")
    assert w.claim_next(1) == []  # the registry does not name its partition yet
    IndexReconciler(backend).tick()
    w.claimer._registry_at = float("-inf")
    (t,) = w.claim_next(1)
    assert t.execution_id == eid


def test_ffcore_creates_are_left_alone(backend):
    Client(backend).create_many([{"kind": "k", "lane": "fz"} for _ in range(5)])
    assert IndexReconciler(backend).tick() == 0


def test_the_delayed_promoter_wakes_the_lane_it_promotes_on(backend):
    r = Client(backend).create(kind="k", lane="fd", delay_until=backend.now_ms() + 50)
    time.sleep(0.08)
    ps = confirmed_pubsub(backend.client, keys.lane_wake("fd"))
    try:
        assert DelayedPromoter(backend).scan_partition(r.execution_id.partition_index, backend.now_ms()) == 1
        msg = ps.get_message(timeout=2.0)
    finally:
        ps.close()
    assert msg is not None and wake.parse(msg["data"]) == [r.execution_id.partition_index]
