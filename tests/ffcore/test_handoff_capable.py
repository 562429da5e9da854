"""Work that needs capabilities is handed to a worker that has them (issue #21, S4): a listening worker whose claim
from a capability index (`LaneKeys.capable`) comes up short is listed on that list's own idle set
(`LaneKeys.idle_capable`); a create needing exactly those capabilities claims its head for the worker idle longest
there and publishes it on the worker's channel. A batch offers every such create; only the lane's last one tells
the whole lane when nobody is idle. Workers popped that are full or gone are passed over."""

from __future__ import annotations

import time
from typing import Any

from ffcore import functions as F
from ffcore import keys
from ffcore.execution.client import Client
from ffcore.ids import new_uuid_pairs
from ffcore.keys import PartitionKeys
from ffcore.partition import lane_partition
from ffcore.policy import Policy
from ffcore.worker.worker import Registry, Worker, WorkerConfig

from .invariants import LANE, WIID, WORKER, check
from .test_fastpath import claim_next, snapshot
from .test_wake_one import drain_raw, subscribed
from .workerkit import running

TTL = 30_000
GPU = Policy(required_capabilities=("gpu",))


def _lane(backend: Any, lane: str = LANE) -> Any:
    return PartitionKeys(lane_partition(lane, backend.settings.partitions.flow)).lane(lane)


def _claim_capable(backend: Any, ids: list[tuple[str, str]], *, slots: int = 2, caps: str = "gpu") -> Any:
    n = lane_partition(LANE, backend.settings.partitions.flow)
    return backend.call(F.claim_capable(n, caps_csv=caps, lane=LANE, worker_id=WORKER, worker_instance_id=WIID,
                                        capabilities_csv=caps, lease_ttl_ms=TTL, ids=ids, idle=slots)).raw[0]


def _members(backend: Any, key: str) -> list[str]:
    return [m.decode() for m in backend.client.zrange(key, 0, -1)]


def test_a_short_capable_claim_lists_the_worker_for_that_list_and_a_create_hands_it_the_task(backend):
    c = Client(backend)
    a = str(c.create(kind="job", lane=LANE, payload=b"pa", policy=GPU).execution_id)  # nobody idle yet
    got = _claim_capable(backend, [("LID-A", "AID-A")])
    assert [x.execution_id for x in got.claimed] == [a]
    member = F.idle_member(WORKER, WIID, TTL, 2)
    assert _members(backend, _lane(backend).idle_capable("gpu")) == []  # that claim came back full
    assert _claim_capable(backend, new_uuid_pairs(1)).claimed == []  # short: listed for "gpu", not the lane
    assert _members(backend, _lane(backend).idle_capable("gpu")) == [member]
    assert _members(backend, _lane(backend).idle) == []
    with subscribed(backend, keys.worker_wake(WIID), keys.lane_wake(LANE)) as ps:
        b = str(c.create(kind="job", lane=LANE, payload=b"pa", policy=GPU).execution_id)
        msgs = drain_raw(ps)
    assert [ch for ch, _ in msgs] == [keys.worker_wake(WIID)]  # no lane-wide hint
    lane, _, t = F.parse_handoff(msgs[0][1])
    assert (lane, t.execution_id, t.payload, t.attempt_type) == (LANE, b, b"pa", "initial")
    assert check(backend, b)["current_worker_instance_id"] == WIID
    # The keys its own capable claim of the same task would have left, capability index entry removed included.
    assert snapshot(backend, a, {"LID-A": "LID", "AID-A": "AID"}) == snapshot(
        backend, b, {t.lease_id: "LID", t.attempt_id: "AID"})
    assert backend.client.zscore(_lane(backend).capable("gpu"), b) is None
    assert _members(backend, _lane(backend).idle_capable("gpu")) == []  # both slots leased now


def test_plain_work_and_other_capabilities_leave_a_capable_listing_alone(backend):
    c = Client(backend)
    _claim_capable(backend, new_uuid_pairs(1))
    listing = _members(backend, _lane(backend).idle_capable("gpu"))
    assert len(listing) == 1
    with subscribed(backend, keys.worker_wake(WIID), keys.lane_wake(LANE)) as ps:
        plain = str(c.create(kind="job", lane=LANE, payload=b"").execution_id)
        cpu = str(c.create(kind="job", lane=LANE, payload=b"", policy=Policy(required_capabilities=("cpu",)))
                  .execution_id)
        msgs = drain_raw(ps)
    n = str(lane_partition(LANE, backend.settings.partitions.flow)).encode()
    # Nobody idle for either: the lane is told, the capable work's hint naming its list.
    assert msgs == [(keys.lane_wake(LANE), n), (keys.lane_wake(LANE), n + b" cpu")]
    assert _members(backend, _lane(backend).idle_capable("gpu")) == listing
    assert check(backend, plain)["lifecycle_phase"] == check(backend, cpu)["lifecycle_phase"] == "runnable"


def test_a_batch_offers_each_capable_create_and_only_its_last_tells_the_lane(backend):
    c = Client(backend)
    key = _lane(backend).idle_capable("gpu")
    backend.client.zadd(key, {F.idle_member(WORKER, WIID, TTL, 1): 1, F.idle_member("other", "other-1", TTL, 1): 2})
    spec = {"kind": "job", "lane": LANE, "payload": b"", "policy": GPU}
    with subscribed(backend, keys.worker_wake(WIID), keys.worker_wake("other-1"), keys.lane_wake(LANE)) as ps:
        first, second, third = (str(r.execution_id) for r in c.create_many([spec, spec, spec]))
        msgs = drain_raw(ps)
        n = str(lane_partition(LANE, backend.settings.partitions.flow)).encode()
        assert [(ch, F.parse_handoff(d)[2].execution_id if d.startswith(F.HANDOFF) else d) for ch, d in msgs] == [
            (keys.worker_wake(WIID), first), (keys.worker_wake("other-1"), second), (keys.lane_wake(LANE), n + b" gpu")]
        assert check(backend, third)["lifecycle_phase"] == "runnable"
        # Nobody idle: two creates, one hint (the batch's last), not one each.
        c.create_many([spec, spec])
        assert drain_raw(ps) == [(keys.lane_wake(LANE), n + b" gpu")]


def test_a_full_or_gone_worker_is_passed_over_for_the_next_idle_one(backend):
    c = Client(backend)
    held = str(c.create(kind="job", lane=LANE, payload=b"").execution_id)
    assert [x.execution_id for x in claim_next(backend).claimed] == [held]  # WIID's one slot is taken
    backend.client.zadd(_lane(backend).idle, {F.idle_member(WORKER, WIID, TTL, 1): 1,
                                              F.idle_member("gone", "gone-1", TTL, 4): 2,
                                              F.idle_member("other", "other-1", TTL, 1): 3})
    with subscribed(backend, keys.worker_wake(WIID), keys.worker_wake("other-1"), keys.lane_wake(LANE)) as ps:
        e = str(c.create(kind="job", lane=LANE, payload=b"").execution_id)
        msgs = drain_raw(ps)
    assert [(ch, F.parse_handoff(d)[2].execution_id) for ch, d in msgs] == [(keys.worker_wake("other-1"), e)]
    assert check(backend, e)["current_worker_instance_id"] == "other-1"
    assert backend.client.zcard(_lane(backend).idle) == 0  # the full one and the gone one were taken off


def test_a_running_capable_worker_is_handed_its_work_and_leaves_the_listing_when_it_stops(backend):
    lane = "ho-caps"
    ran: list[str] = []
    reg = Registry()

    @reg.handler("k")
    def run(task: Any) -> None:
        ran.append(str(task.execution_id))

    w = Worker(backend, WorkerConfig(lanes=(lane,), capabilities=("gpu",), concurrency=1, poll_interval_ms=5_000), reg)
    c = Client(backend)
    idle = PartitionKeys(lane_partition(lane, backend.settings.partitions.flow)).lane(lane).idle_capable("gpu")
    with running([w], listening=False) as (thread,):
        first = str(c.create(kind="k", lane=lane, payload=b"", policy=GPU).execution_id)
        deadline = time.monotonic() + 10
        while not backend.client.zcard(idle) or first not in ran:  # its completion's claim came back short
            assert time.monotonic() < deadline, "the worker never listed itself for gpu work"
            time.sleep(0.01)
        second = str(c.create(kind="k", lane=lane, payload=b"", policy=GPU).execution_id)
        while second not in ran:
            assert time.monotonic() < deadline, "the handed task never ran"
            time.sleep(0.01)
        assert w.handoffs == 1
    assert not thread.is_alive() and ran == [first, second]
    assert backend.client.zcard(idle) == 0


def test_a_worker_that_starts_listening_is_listed_on_every_source_by_its_next_claim(backend):
    """Claims made before its listener subscribed listed it nowhere; its capability index and the lane's eligible
    set are empty, so a plain poll claims neither. The claim after it starts listening claims both anyway
    (each of one, coming back short) and so lists it on both idle sets."""
    lane = "ho-relist"
    c = Client(backend)
    c.create(kind="k", lane=lane, payload=b"", policy=GPU)
    w = Worker(backend, WorkerConfig(lanes=(lane,), capabilities=("gpu",), concurrency=1), Registry())
    assert len(w.claim_next(1)) == 1  # not listening yet: listed nowhere
    lk = PartitionKeys(lane_partition(lane, backend.settings.partitions.flow)).lane(lane)
    member = F.idle_member(w.config.worker_id, w.config.worker_instance_id, w.config.lease_ttl_ms, 1)
    w.claimer.listening = True
    assert w.claim_next(1) == []  # nothing there: no claim made, so still listed nowhere
    assert _members(backend, lk.idle_capable("gpu")) == _members(backend, lk.idle) == []
    w.claimer.relist = True  # what its listener sets once subscribed (and a slot freed without a successor claim)
    assert w.claim_next(1) == []
    assert _members(backend, lk.idle_capable("gpu")) == _members(backend, lk.idle) == [member]
    assert w.claimer.relist is False  # once


def test_a_listening_worker_ignores_the_lane_hint_of_work_it_cannot_run(backend):
    # Issue #21, S4: a caps create finding nobody idle on its list's idle set tells the lane, naming the list; the
    # workers of the lane lacking it (99 of 100 there) do not claim — they did.
    lane = "ho-ignore"
    workers = {name: Worker(backend, WorkerConfig(lanes=(lane,), concurrency=2, poll_interval_ms=60_000,
                                                  listening_poll_interval_ms=60_000, capabilities=caps), Registry())
               for name, caps in (("plain", ()), ("gpu", ("gpu",)))}
    claims = dict.fromkeys(workers, 0)
    for name, w in workers.items():
        real = w.claim_next

        def spy(n: int = 1, name: str = name, real: Any = real) -> Any:
            claims[name] += 1
            return real(n)

        w.claim_next = spy  # type: ignore[method-assign]
        w.driver._idle_s = 30.0  # no empty-handed polls meanwhile: every claim below answers a hint

    with running(list(workers.values())):
        time.sleep(0.2)
        before = dict(claims)
        n = lane_partition(lane, backend.settings.partitions.flow)
        backend.client.publish(keys.lane_wake(lane), f"{n} gpu")
        deadline = time.monotonic() + 2
        while claims["gpu"] == before["gpu"] and time.monotonic() < deadline:
            time.sleep(0.01)
        assert claims["gpu"] > before["gpu"]  # the one that can run it looks
        time.sleep(0.1)
        assert claims["plain"] == before["plain"]
        backend.client.publish(keys.lane_wake(lane), f"{n}")
        deadline = time.monotonic() + 2
        while claims["plain"] == before["plain"] and time.monotonic() < deadline:
            time.sleep(0.01)
        assert claims["plain"] > before["plain"]  # plain work: everyone looks, as before
