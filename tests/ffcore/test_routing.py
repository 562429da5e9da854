"""Capability routing through our capability index: capable workers claim directly, the others leave
indexed executions alone (no route block, no bouncing), and route unblocks index what they release."""

from __future__ import annotations

import json
import threading
import time

import pytest

from ffcore import keys, routing
from ffcore.budgets import admission
from ffcore.execution.client import Client
from ffcore.ids import ExecutionId
from ffcore.keys import PartitionKeys
from ffcore.policy import Policy
from ffcore.reads import text
from ffcore.worker.worker import Registry, Worker, WorkerConfig

from .invariants import check, core
from .workerkit import running


def capable_index(eid, lane: str, csv: str) -> str:
    return PartitionKeys(eid.partition_index).lane(lane).capable(csv)


@pytest.mark.parametrize("caps", [["gpu"], ["ssd", "gpu"], ["b", "a", "b"], ["é", "z", "a"]])
def test_the_canonical_list_is_what_the_library_stores(backend, caps):
    policy = json.dumps({"routing_requirements": {"required_capabilities": caps}})
    eid = Client(backend).create_call(kind="k", lane="r", payload=b"")
    eid.args[6] = policy
    reply = backend.call(eid)
    stored = core(backend, str(reply[0]))["required_capabilities"]
    assert routing.required_csv(policy) == stored


@pytest.mark.parametrize("policy", ["", "{}", "not json", '{"routing_requirements": {"required_capabilities": []}}',
                                    '{"routing_requirements": {"required_capabilities": ["a,b"]}}',
                                    '{"routing_requirements": {"required_capabilities": ["a b"]}}',
                                    '{"routing_requirements": {"required_capabilities": [1]}}'])
def test_no_list_or_a_list_the_library_refuses_indexes_nothing(policy):
    assert routing.required_csv(policy) == ""


def test_a_create_indexes_an_execution_that_requires_capabilities(backend):
    c = Client(backend)
    gpu = c.create(kind="k", lane="r", policy=Policy(required_capabilities=("gpu", "cuda"))).execution_id
    plain = c.create(kind="k", lane="r").execution_id
    later = c.create(kind="k", lane="r", policy=Policy(required_capabilities=("gpu",)),
                     delay_until=backend.now_ms() + 60_000).execution_id
    assert backend.client.zscore(capable_index(gpu, "r", "cuda,gpu"), str(gpu)) is not None
    assert {text(x) for x in backend.client.smembers(keys.lane_capsets("r"))} == {"cuda,gpu"}
    assert backend.client.zcard(capable_index(plain, "r", "")) == 0
    assert backend.client.zscore(capable_index(later, "r", "gpu"), str(later)) is None  # delayed: not eligible


def test_workers_claim_only_what_they_can_run_and_nothing_is_route_blocked(backend):
    c = Client(backend)
    caps = [f"cap-{j}" for j in range(6)]
    created = {c.create(kind="routed", lane="rt", payload=cap, policy=Policy(required_capabilities=(cap,)))
               .execution_id: cap for cap in caps for _ in range(5)}
    ran: dict[str, str] = {}
    lock = threading.Lock()
    workers = []
    for cap in caps:
        reg = Registry()

        @reg.handler("routed")
        def run(task, cap: str = cap) -> None:
            with lock:
                ran[task.execution_id] = cap

        workers.append(Worker(backend, WorkerConfig(lanes=("rt",), capabilities=(cap,), concurrency=2,
                                                    poll_interval_ms=20), reg))
    with running(workers, listening=False):
        deadline = time.monotonic() + 20
        while len(ran) < len(created) and time.monotonic() < deadline:
            time.sleep(0.02)
    assert ran == created  # every execution ran, each on the worker holding its capability
    n = next(iter(created)).partition_index
    for eid in created:
        c_ = check(backend, eid)
        assert (c_["public_state"], c_["total_attempt_count"]) == ("completed", "1")
        assert c_.get("blocking_detail", "") == ""
    for cap in caps:
        assert backend.client.zcard(PartitionKeys(n).lane("rt").capable(cap)) == 0  # claims pruned the index
    assert backend.client.zcard(PartitionKeys(n).lane("rt").blocked_route) == 0


def test_a_worker_without_the_capability_leaves_an_indexed_execution_alone(backend):
    eid = Client(backend).create(kind="k", lane="r2", policy=Policy(required_capabilities=("gpu",))).execution_id
    w = Worker(backend, WorkerConfig(lanes=("r2",), capabilities=("cpu",), concurrency=4), Registry())
    assert w.claim_next(4) == []
    assert core(backend, eid)["public_state"] == "waiting"  # not route-blocked
    gpu = Worker(backend, WorkerConfig(lanes=("r2",), capabilities=("gpu", "ssd"), concurrency=4), Registry())
    (t,) = gpu.claim_next(4)
    assert t.execution_id == eid
    check(backend, eid)


def test_stale_index_entries_are_dropped_when_met(backend):
    c = Client(backend)
    eid = c.create(kind="k", lane="r3", policy=Policy(required_capabilities=("gpu",))).execution_id
    c.cancel(eid, reason="changed my mind")
    assert core(backend, eid)["public_state"] == "cancelled"
    index = capable_index(eid, "r3", "gpu")
    assert backend.client.zscore(index, str(eid)) is not None  # the cancel did not touch our hint
    gpu = Worker(backend, WorkerConfig(lanes=("r3",), capabilities=("gpu",), concurrency=1), Registry())
    assert gpu.claim_next(1) == []
    assert backend.client.zscore(index, str(eid)) is None


def test_a_create_writes_the_index_entry_ahead_of_the_execution(backend, monkeypatch):
    """A worker lacking the capability must never meet the execution in L:eligible unindexed (it would
    route-block it): the index ZADD travels ahead of the create in the same pipeline."""
    sent: list[tuple] = []
    real = backend._direct.pipeline

    def record(commands):
        sent.extend(commands)
        return real(commands)

    monkeypatch.setattr(backend._direct, "pipeline", record)
    eid = Client(backend).create(kind="k", lane="r5", policy=Policy(required_capabilities=("gpu",))).execution_id
    names = [(str(c[0]).upper(), str(c[1])) for c in sent]
    index = capable_index(eid, "r5", "gpu")
    assert names.index(("ZADD", index)) < names.index(("FCALL", "ff_create_fast"))
    assert backend.client.zscore(index, str(eid)) is not None


def test_an_index_entry_whose_execution_is_not_created_yet_is_kept(backend):
    """The other side of writing the entry ahead: a capable worker meeting it before the create ran
    leaves it (it is not stale yet); once the execution exists, the same claim takes it."""
    from ffcore import functions as F
    from ffcore.ids import new_uuid_pairs

    eid = ExecutionId.mint(7)
    index = PartitionKeys(7).lane("r6").capable("gpu")
    backend.client.zadd(index, {str(eid): 1})

    def claim():
        return backend.call(F.claim_capable(7, caps_csv="gpu", lane="r6", worker_id="w", worker_instance_id="wi",
                                            capabilities_csv="gpu", lease_ttl_ms=30_000,
                                            ids=new_uuid_pairs(1))).raw[0].claimed

    assert claim() == [] and backend.client.zscore(index, str(eid)) is not None
    Client(backend).create(kind="k", lane="r6", execution_id=str(eid), policy=Policy(required_capabilities=("gpu",)))
    assert [c.execution_id for c in claim()] == [str(eid)]
    assert backend.client.zscore(index, str(eid)) is None


def test_a_route_unblock_indexes_the_released_execution(backend):
    c = Client(backend)
    # Created by another client (raw FCALL): not indexed, so the contract's route path applies.
    call = c.create_call(kind="k", lane="r4", payload=b"",
                         policy=Policy(required_capabilities=("gpu",)))
    eid = str(backend.call(call)[0])
    cpu = Worker(backend, WorkerConfig(lanes=("r4",), capabilities=("cpu",), concurrency=1), Registry())
    assert cpu.claim_next(1) == []  # fast path hands it back; the grant is refused; route block
    assert core(backend, eid)["blocking_reason"] == "waiting_for_capable_worker"
    gpu = Worker(backend, WorkerConfig(lanes=("r4",), capabilities=("gpu",), concurrency=1), Registry())
    gpu.heartbeat.register()  # a live capable worker
    try:
        assert admission.unblock(backend, [eid]) == 1
        assert backend.client.zscore(capable_index(ExecutionId(eid), "r4", "gpu"), eid) is not None
        assert cpu.claim_next(1) == []  # and the incapable worker no longer bounces it
        assert core(backend, eid)["public_state"] == "waiting"
        (t,) = gpu.claim_next(1)
        assert t.execution_id == eid
    finally:
        gpu.heartbeat.unregister()


def test_a_program_that_only_calls_claim_next_is_advertised_and_gets_its_route_blocked_work(backend):
    """Issue #24, item 7: registration used to happen only inside Worker.run()."""
    c = Client(backend)
    call = c.create_call(kind="k", lane="r7", payload=b"", policy=Policy(required_capabilities=("gpu",)))
    eid = str(backend.call(call)[0])  # another client's create: not indexed, so it can be route-blocked
    cpu = Worker(backend, WorkerConfig(lanes=("r7",), capabilities=("cpu",), concurrency=1), Registry())
    assert cpu.claim_next(1) == []
    assert core(backend, eid)["blocking_reason"] == "waiting_for_capable_worker"
    assert admission.unblock(backend, [eid]) == 0  # nobody live can run it yet
    gpu = Worker(backend, WorkerConfig(lanes=("r7",), capabilities=("gpu",), concurrency=1), Registry())
    try:
        assert gpu.claim_next(1) == []  # nothing eligible yet, but it is now advertised
        assert text(backend.client.get(keys.worker_caps(gpu.config.worker_instance_id))) == "gpu"
        assert admission.unblock(backend, [eid]) == 1
        (t,) = gpu.claim_next(1)
        assert t.execution_id == eid
    finally:
        gpu.heartbeat.unregister()
        cpu.heartbeat.unregister()
