"""Claims on the local 3-primary cluster: capability routing (whose creates queue index entries ahead of
the FCALLs in one cluster pipeline), reclaims of expired leases, and a running worker end to end."""

from __future__ import annotations

import threading
import time

from ffcore.backend import Backend
from ffcore.engine.lease_expiry import LeaseExpiryScanner
from ffcore.execution.client import Client
from ffcore.policy import Policy
from ffcore.worker.worker import Registry, Worker, WorkerConfig
from tests.ffcore.invariants import check

LANES = tuple(f"cl-{i}" for i in range(8))


def test_a_create_batch_with_capabilities_answers_each_create_in_order(cbackend: Backend):
    c = Client(cbackend)
    specs = [{"kind": "k", "lane": LANES[i % 8], "payload": str(i).encode(),
              "policy": Policy(required_capabilities=("gpu",)) if i % 2 else None} for i in range(16)]
    made = c.create_many(specs)
    assert len({r.execution_id.partition_index for r in made}) > 3
    for spec, r in zip(specs, made, strict=True):
        assert check(cbackend, r.execution_id)["lane_id"] == spec["lane"]
        assert c.get_payload(r.execution_id) == spec["payload"]


def test_workers_claim_only_what_they_can_run(cbackend: Backend):
    c = Client(cbackend)
    gpu = [c.create(kind="k", lane=lane, policy=Policy(required_capabilities=("gpu",))).execution_id for lane in LANES]
    plain = [c.create(kind="k", lane=lane).execution_id for lane in LANES]
    cpu = Worker(cbackend, WorkerConfig(lanes=LANES, concurrency=32, worker_instance_id="cpu"), Registry())
    got = [t for _ in range(4) for t in cpu.claim_next(32)]
    assert sorted(t.execution_id for t in got) == sorted(plain)
    assert {check(cbackend, e)["public_state"] for e in gpu} == {"waiting"}  # left alone, never route-blocked
    capable = Worker(cbackend, WorkerConfig(lanes=LANES, concurrency=32, capabilities=("gpu",),
                                            worker_instance_id="gpu"), Registry())
    got = [t for _ in range(4) for t in capable.claim_next(32)]
    assert sorted(t.execution_id for t in got) == sorted(gpu)


def test_an_expired_lease_is_reclaimed_as_a_new_attempt(cbackend: Backend):
    c = Client(cbackend)
    eids = [c.create(kind="k", lane=lane).execution_id for lane in LANES]
    gone = Worker(cbackend, WorkerConfig(lanes=LANES, concurrency=16, lease_ttl_ms=150,
                                         worker_instance_id="gone"), Registry())
    assert len([t for _ in range(4) for t in gone.claim_next(16)]) == len(eids)
    time.sleep(0.2)
    assert LeaseExpiryScanner(cbackend).tick() == len(eids)
    heir = Worker(cbackend, WorkerConfig(lanes=LANES, concurrency=16, worker_instance_id="heir"), Registry())
    heir.claimer._reclaim_ring_at = float("-inf")  # due for the ring probe: these partitions are not its registry's
    got = heir.reclaim(16)
    assert sorted(t.execution_id for t in got) == sorted(eids)
    for t in got:
        assert t.attempt_index == 1 and t.lease_epoch == 2
        t.complete(b"ok")
        assert check(cbackend, t.execution_id)["public_state"] == "completed"


def test_a_running_worker_drains_work_on_every_primary(cbackend: Backend):
    c = Client(cbackend)
    reg = Registry()
    reg.handler("k")(lambda task: task.payload)
    w = Worker(cbackend, WorkerConfig(lanes=LANES, concurrency=8, poll_interval_ms=50), reg)
    t = threading.Thread(target=w.run, kwargs={"install_signal_handlers": False}, daemon=True)
    t.start()
    try:
        made = c.create_many([{"kind": "k", "lane": LANES[i % 8], "payload": b"%d" % i} for i in range(40)])
        deadline = time.monotonic() + 20
        while w.completed < len(made) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        w.stop()
        t.join(10)
    assert w.completed == len(made)
    for i, r in enumerate(made):
        assert c.get_result(r.execution_id) == b"%d" % i


def test_a_spread_lane_lives_on_every_primary_and_its_tasks_all_run(cbackend: Backend, cluster):
    """Issue #23: a lane spread over 3 partitions puts its executions on all three primaries."""
    from ffcore import lane_spread
    from ffcore.keys import ExecKeys

    lane_spread.set_spread(cbackend, "hot-lane", 3)
    made = [Client(cbackend).create(kind="k", lane="hot-lane", payload=b"") for _ in range(9)]
    owners = {cbackend.client.get_node_from_key(ExecKeys(r.execution_id).core).port for r in made}
    assert owners == set(cluster.primary_ports())
    ran: list[str] = []
    reg = Registry()

    @reg.handler("*")
    def body(task) -> None:
        ran.append(str(task.execution_id))

    w = Worker(cbackend, WorkerConfig(lanes=("hot-lane",), concurrency=4, poll_interval_ms=50), reg)
    th = threading.Thread(target=w.run, kwargs={"install_signal_handlers": False}, daemon=True)
    th.start()
    try:
        deadline = time.monotonic() + 20
        while len(ran) < 9 and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        w.stop()
        th.join(5)
    assert sorted(ran) == sorted(str(r.execution_id) for r in made)
