"""The engine through redis-py's cluster client on a local 3-primary Valkey Cluster."""

from __future__ import annotations

from ffcore.execution import listing
from ffcore.execution.client import Client
from ffcore.worker.worker import Registry, Worker, WorkerConfig
from tests.ffcore.invariants import check


def test_the_library_is_loaded_on_every_primary(cbackend):
    primaries = cbackend.client.get_primaries()
    assert len(primaries) == 3
    for node in primaries:
        assert cbackend.client.get_redis_connection(node).fcall("ff_version", 0) == b"6"


def test_executions_on_many_partitions_run_through_the_cluster(cbackend):
    c = Client(cbackend)
    lanes = tuple(f"lane-{i}" for i in range(12))
    created = c.create_many([{"kind": "k", "lane": lane, "payload": b"p"} for lane in lanes])
    parts = {r.execution_id.partition_index for r in created}
    assert len(parts) > 3  # spread over partitions (and so over the three primaries)
    w = Worker(cbackend, WorkerConfig(lanes=lanes, concurrency=16), Registry())
    done = 0
    for _ in range(10):
        for t in w.claim_next(16):
            check(cbackend, t.execution_id)
            t.complete(b"ok:" + t.payload)
            done += 1
        if done == len(created):
            break
    assert done == len(created)
    for r in created:
        check(cbackend, r.execution_id)
        assert c.get_state(r.execution_id) == "completed"
        assert c.get_result(r.execution_id) == b"ok:p"


def test_listing_merges_partitions_across_nodes(cbackend):
    c = Client(cbackend)
    created = c.create_many([{"kind": "k", "lane": f"l{i}"} for i in range(30)])
    page = listing.list_executions(cbackend, listing.Query(limit=50), c.lanes())
    assert {r["execution_id"] for r in page.rows} == {r.execution_id for r in created}


def test_cancel_and_replay_through_the_cluster(cbackend):
    c = Client(cbackend)
    eid = c.create(kind="k", lane="solo").execution_id
    c.cancel(eid, reason="test")
    check(cbackend, eid)
    assert c.get_state(eid) == "cancelled"
    c.replay(eid)
    check(cbackend, eid)
    assert c.get_state(eid) == "waiting"
