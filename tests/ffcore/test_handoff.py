"""A create hands its task to the idle worker it wakes (issue #21, lua/fastpath.lua hand_off): a worker that takes
hand-offs is listed on the lane's idle set with its lease parameters (`functions.idle_member`); the create claims
the lane's head for it — the same keys as that worker's own ff_claim_next would leave — and publishes the claimed
task on the worker's channel (`functions.parse_handoff`). No claim round trip; a worker not listening, or a head
the fast path may not claim for it, gets the plain wake, as before."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from ffcore import functions as F
from ffcore import keys
from ffcore.errors import ScriptError
from ffcore.execution.client import Client
from ffcore.ids import new_uuid
from ffcore.keys import ExecKeys, PartitionKeys
from ffcore.partition import lane_partition
from ffcore.policy import Policy
from ffcore.reads import decode_map
from ffcore.worker.worker import Registry, Worker, WorkerConfig

from .invariants import LANE, WIID, WORKER, check
from .test_fastpath import claim_next, snapshot
from .test_wake_one import drain_raw, subscribed

TTL = 30_000  # test_fastpath.claim_next's lease


def _list_idle(backend: Any, lane: str = LANE, slots: int = 1, wiid: str = WIID, score: int = 1) -> str:
    """A worker on the lane's idle set as a hand-off taking worker (what its short claim writes)."""
    member = F.idle_member(WORKER, wiid, TTL, slots)
    backend.client.zadd(_idle_key(backend, lane), {member: score})
    return member


def _after_the_ms_of(backend: Any, eid: str) -> None:
    """Wait (polling the server clock) until a millisecond after `eid`'s creation: the lane orders by (priority,
    creation ms), and two creates in one millisecond fall back to their random ids — not the order to test."""
    created = int(backend.client.hget(ExecKeys(eid).core, "created_at"))
    deadline = time.monotonic() + 5
    while backend.now_ms() <= created:
        assert time.monotonic() < deadline, "the server clock did not move"


def _run_first_then_listed(backend: Any, c: Client, lane: str, idle: str, ran: list[str]) -> str:
    """Create one task for a running worker and wait until it ran it and listed itself idle (the next create is
    handed over): the first task's id."""
    first = str(c.create(kind="k", lane=lane, payload=b"").execution_id)
    deadline = time.monotonic() + 10
    while not backend.client.zcard(idle) or first not in ran:
        assert time.monotonic() < deadline, "the worker never listed itself as idle"
        time.sleep(0.01)
    return first


def _idle_key(backend: Any, lane: str = LANE) -> str:
    return PartitionKeys(lane_partition(lane, backend.settings.partitions.flow)).lane(lane).idle


def test_the_handed_task_leaves_the_keys_of_its_own_claim_and_the_message_carries_it(backend):
    c = Client(backend)
    spec = {"kind": "job", "lane": LANE, "payload": b"\x00\xffbytes:1:", "tags": {"team": "x"},
            "policy": Policy(attempt_timeout_ms=60_000)}
    a = str(c.create(**spec).execution_id)  # nobody idle: stays eligible; claimed below as the worker would
    got = claim_next(backend, ids=[("LID-A", "AID-A")])
    assert [x.execution_id for x in got.claimed] == [a]
    _list_idle(backend, slots=2)  # it holds a's lease: one slot of two is free
    with subscribed(backend, keys.worker_wake(WIID), keys.lane_wake(LANE)) as ps:
        b = str(c.create(**spec).execution_id)
        msgs = drain_raw(ps)
    assert len(msgs) == 1 and msgs[0][0] == keys.worker_wake(WIID)  # the worker alone; no lane-wide hint
    lane, part, t = F.parse_handoff(msgs[0][1])
    assert (lane, part) == (LANE, lane_partition(LANE, backend.settings.partitions.flow))
    assert (t.execution_id, t.lease_epoch, t.attempt_index, t.attempt_type, t.kind) == (b, 1, 0, "initial", "job")
    assert t.payload == b"\x00\xffbytes:1:" and t.tags == {"team": "x"}
    assert t.lease_id != t.attempt_id and len(t.lease_id) == 36
    core = check(backend, b)
    assert (core["lifecycle_phase"], core["current_worker_instance_id"], core["current_lease_id"]) == (
        "active", WIID, t.lease_id)
    assert int(core["lease_expires_at"]) == t.lease_expires_at
    # Every key and index entry as the worker's own claim of the same task left them.
    assert snapshot(backend, a, {"LID-A": "LID", "AID-A": "AID"}) == snapshot(
        backend, b, {t.lease_id: "LID", t.attempt_id: "AID"})
    assert backend.client.zcard(PartitionKeys(part).lane(LANE).idle) == 0  # taken off: one hand-off per listing


@pytest.mark.parametrize("spec", [
    {"payload": b""},
    {"payload": b"p", "policy": Policy(attempt_timeout_ms=5_000)},
    {"payload": b"q", "tags": {"team": "y", "n": "2"}},
], ids=["bare", "policy", "tags"])
def test_a_task_handed_over_by_its_own_create_carries_what_a_claim_reads_and_is_not_read_back(backend, spec):
    """The create hands over the execution it just wrote without reading it back (core, policy, payload, and the
    tags hash when it wrote none): the message and the keys are those of a claim of a twin made by ff_claim_next."""
    c = Client(backend)
    twin = str(c.create(kind="job", lane=LANE, **spec).execution_id)
    own = claim_next(backend, ids=[("LID-T", "AID-T")]).claimed[0]
    _list_idle(backend, slots=2)
    before = backend.client.info("commandstats")
    with subscribed(backend, keys.worker_wake(WIID)) as ps:
        eid = str(c.create(kind="job", lane=LANE, **spec).execution_id)
        msgs = drain_raw(ps)
    after = backend.client.info("commandstats")
    t = F.parse_handoff(msgs[0][1])[2]
    assert t.execution_id == eid
    assert (t.kind, t.payload, t.policy_json, t.tags) == (own.kind, own.payload, own.policy_json, own.tags)
    assert snapshot(backend, twin, {"LID-T": "LID", "AID-T": "AID"}) == snapshot(
        backend, eid, {t.lease_id: "LID", t.attempt_id: "AID"})

    def calls(name: str) -> int:
        return after.get(f"cmdstat_{name}", {}).get("calls", 0) - before.get(f"cmdstat_{name}", {}).get("calls", 0)

    assert calls("get") == 0  # neither payload nor policy read back (nor an idempotency key: none given)
    assert calls("hgetall") == (1 if spec.get("tags") else 0)


def test_the_head_of_the_lane_is_handed_over_first(backend):
    """The lane's order holds: with older work waiting, the idle worker gets the oldest, not the newest."""
    c = Client(backend)
    older = str(c.create(kind="job", lane=LANE, payload=b"1").execution_id)
    _after_the_ms_of(backend, older)
    _list_idle(backend)
    with subscribed(backend, keys.worker_wake(WIID)) as ps:
        newer = str(c.create(kind="job", lane=LANE, payload=b"2").execution_id)
        msgs = drain_raw(ps)
    assert [F.parse_handoff(d)[2].execution_id for _, d in msgs] == [older]
    assert check(backend, newer)["lifecycle_phase"] == "runnable"


def test_a_worker_not_listening_gets_nothing_claimed_and_the_lane_is_told(backend):
    c = Client(backend)
    _list_idle(backend)  # listed, but its listener is gone
    with subscribed(backend, keys.lane_wake(LANE)) as ps:
        e = str(c.create(kind="job", lane=LANE, payload=b"").execution_id)
        msgs = drain_raw(ps)
    n = lane_partition(LANE, backend.settings.partitions.flow)
    assert msgs == [(keys.lane_wake(LANE), str(n).encode())]
    core = check(backend, e)
    assert (core["lifecycle_phase"], core["eligibility_state"], core["current_lease_epoch"]) == (
        "runnable", "eligible_now", "0")
    assert backend.client.zscore(PartitionKeys(n).lane(LANE).eligible, e) is not None


def test_work_needing_admission_is_left_to_the_workers_own_claim_and_it_is_told(backend):
    """Budget-attached work at the head goes through the worker's admission (its own claim): the create hands
    over the plain task behind it and also tells the worker to claim."""
    c = Client(backend)
    attached = str(c.create(kind="job", lane=LANE, payload=b"", policy=Policy(budget_ids=(new_uuid(),))).execution_id)
    _after_the_ms_of(backend, attached)
    _list_idle(backend)
    with subscribed(backend, keys.worker_wake(WIID)) as ps:
        plain = str(c.create(kind="job", lane=LANE, payload=b"").execution_id)
        msgs = drain_raw(ps)
    n = lane_partition(LANE, backend.settings.partitions.flow)
    assert len(msgs) == 2 and msgs[0] == (keys.worker_wake(WIID), f"{LANE} {n}".encode())
    assert F.parse_handoff(msgs[1][1])[2].execution_id == plain
    assert check(backend, attached)["lifecycle_phase"] == "runnable"
    assert check(backend, plain)["lifecycle_phase"] == "active"


def test_a_create_without_handoff_ids_only_wakes(backend):
    """An older client passes no ids: the idle worker is told, not handed a task."""
    c = Client(backend)
    _list_idle(backend)
    call = c.create_call(kind="job", lane=LANE, payload=b"")
    eid = str(call.args[0])
    n = lane_partition(LANE, backend.settings.partitions.flow)
    with subscribed(backend, keys.worker_wake(WIID)) as ps:
        backend.call(F.as_fast_create(call, created_index=PartitionKeys(n).created, wake=True))
        msgs = drain_raw(ps)
    assert msgs == [(keys.worker_wake(WIID), f"{LANE} {n}".encode())]
    assert decode_map(backend.client.hgetall(ExecKeys(eid).core))["lifecycle_phase"] == "runnable"


def test_a_worker_with_slots_left_is_listed_again_behind_the_others_until_its_leases_fill_them(backend):
    c = Client(backend)
    two = _list_idle(backend, slots=2, score=1)
    other = _list_idle(backend, slots=1, wiid="other-1", score=2)
    with subscribed(backend, keys.worker_wake(WIID), keys.worker_wake("other-1")) as ps:
        first = str(c.create(kind="job", lane=LANE, payload=b"").execution_id)
        # One lease of two slots: listed again, now behind the worker idle longer.
        assert [m.decode() for m in backend.client.zrange(_idle_key(backend), 0, -1)] == [other, two]
        second = str(c.create(kind="job", lane=LANE, payload=b"").execution_id)  # to the other, which is full then
        third = str(c.create(kind="job", lane=LANE, payload=b"").execution_id)  # WIID's second slot
        msgs = drain_raw(ps)
    handed = [(ch, F.parse_handoff(d)[2].execution_id) for ch, d in msgs]
    assert handed == [(keys.worker_wake(WIID), first), (keys.worker_wake("other-1"), second),
                      (keys.worker_wake(WIID), third)]
    assert backend.client.zcard(_idle_key(backend)) == 0  # both full by their leases


def test_a_claim_taking_handoffs_must_name_its_slots(backend):
    n = lane_partition(LANE, backend.settings.partitions.flow)
    call = F.claim_next(n, lane=LANE, worker_id=WORKER, worker_instance_id=WIID, capabilities_csv="", lease_ttl_ms=TTL,
                        ids=[(new_uuid(), new_uuid())], idle=4)
    assert call.args[-2:] == ["2", 4]
    for bad in ("0", "1.5", "x"):
        with pytest.raises(ScriptError) as e:
            backend.call(F.Call(call.function, call.keys, [*call.args[:-1], bad], call.parse))
        assert e.value.code == "invalid_input"
    assert backend.client.zcard(_idle_key(backend)) == 0


def test_malformed_handoff_messages_are_refused():
    for bad in (F.HANDOFF, F.HANDOFF + b"3:abc", F.HANDOFF + b"x:1", F.HANDOFF + b"9:short"):
        with pytest.raises(ValueError):
            F.parse_handoff(bad)


def test_a_task_handed_over_as_the_worker_stops_still_runs(backend):
    """The drain reads its own channel to the end before the listener stops: a task handed over just before
    the stop is run (or released), never left leased to a worker that is gone."""
    lane = "ho-stop"
    ran: list[str] = []
    reg = Registry()

    @reg.handler("k")
    def run(task: Any) -> None:
        time.sleep(0.2)
        ran.append(str(task.execution_id))

    w = Worker(backend, WorkerConfig(lanes=(lane,), concurrency=2, poll_interval_ms=5_000), reg)
    thread = threading.Thread(target=w.run, kwargs={"install_signal_handlers": False}, daemon=True)
    thread.start()
    c = Client(backend)
    n = lane_partition(lane, backend.settings.partitions.flow)
    idle = PartitionKeys(n).lane(lane).idle
    try:
        first = _run_first_then_listed(backend, c, lane, idle, ran)
        handed = str(c.create(kind="k", lane=lane, payload=b"").execution_id)
        w.stop()
        thread.join(15)
    finally:
        w.stop()
    assert not thread.is_alive()
    assert w.handoffs == 1 and ran == [first, handed]
    assert decode_map(backend.client.hgetall(ExecKeys(handed).core))["lifecycle_phase"] == "terminal"
    assert backend.client.zcard(idle) == 0


def test_a_task_handed_to_a_worker_that_died_unread_is_reclaimed_when_its_lease_runs_out(backend):
    """Crash after the hand-off: the task is leased to a worker that never read it (killed with the message in
    its socket). Nothing is lost: its lease expires like any claimed task's and another worker reclaims it."""
    c = Client(backend)
    member = F.idle_member("dead", "dead-1", 200, 4)
    backend.client.zadd(_idle_key(backend), {member: 1})
    ps = backend.client.pubsub()
    ps.subscribe(keys.worker_wake("dead-1"))
    assert ps.get_message(timeout=2.0)["type"] == "subscribe"
    eid = str(c.create(kind="job", lane=LANE, payload=b"p").execution_id)
    ps.close()  # the worker is gone, its hand-off unread
    core = check(backend, eid)
    assert (core["lifecycle_phase"], core["current_worker_instance_id"]) == ("active", "dead-1")
    time.sleep(0.25)
    rescuer = Worker(backend, WorkerConfig(worker_id="rescuer", worker_instance_id="rescuer-1"), Registry())
    (task,) = rescuer.reclaim(1)
    assert (task.execution_id, task.attempt_type, task.attempt_index, task.payload) == (eid, "reclaim", 1, b"p")
    task.complete("rescued")
    assert check(backend, eid)["public_state"] == "completed"


def test_a_repeated_hand_off_of_a_claim_the_worker_holds_does_not_run_its_handler_again(backend, caplog):
    """The same hand-off message twice (a channel that delivers it again, e.g. around a failover): the second
    names the claim the worker already holds, and is ignored."""
    lane = "ho-twice"
    ran: list[str] = []
    let_go = threading.Event()
    reg = Registry()

    @reg.handler("k")
    def run(task: Any) -> None:
        ran.append(str(task.execution_id))
        if len(ran) > 1:
            let_go.wait(5)  # held: the repeat arrives while the claim is in flight

    w = Worker(backend, WorkerConfig(lanes=(lane,), concurrency=2, poll_interval_ms=5_000), reg)
    thread = threading.Thread(target=w.run, kwargs={"install_signal_handlers": False}, daemon=True)
    c = Client(backend)
    idle = PartitionKeys(lane_partition(lane, backend.settings.partitions.flow)).lane(lane).idle
    channel = keys.worker_wake(w.config.worker_instance_id)
    with subscribed(backend, channel) as spy:
        thread.start()
        try:
            first = _run_first_then_listed(backend, c, lane, idle, ran)
            deadline = time.monotonic() + 10
            handed = str(c.create(kind="k", lane=lane, payload=b"").execution_id)
            message = None
            while message is None:
                assert time.monotonic() < deadline, "no hand-off was published"
                m = spy.get_message(timeout=0.1)
                if m is not None and bytes(m["data"]).startswith(F.HANDOFF):
                    message = m["data"]
            backend.client.publish(channel, message)
            while "already held was ignored" not in caplog.text:
                assert time.monotonic() < deadline, "the repeated hand-off was not read"
                time.sleep(0.01)
            let_go.set()
            while decode_map(backend.client.hgetall(ExecKeys(handed).core)).get("lifecycle_phase") != "terminal":
                assert time.monotonic() < deadline, "the handed task did not complete"
                time.sleep(0.01)
        finally:
            let_go.set()
            w.stop()
            thread.join(15)
    assert ran == [first, handed] and w.handoffs == 1
