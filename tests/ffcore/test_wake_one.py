"""A create wakes ONE idle worker of its lane (issue #21): claims of listening workers keep the lane's idle
set (`LaneKeys.idle`) and the create tells the one idle longest on its own channel (`keys.worker_wake`);
with nobody idle, or nobody listening there, every worker of the lane is told, as before."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ffcore import functions as F
from ffcore import keys, wake
from ffcore.execution.client import Client
from ffcore.ids import ExecutionId
from ffcore.keys import PartitionKeys
from ffcore.policy import Policy
from ffcore.worker.worker import Registry, Worker, WorkerConfig


@contextmanager
def subscribed(backend: Any, *channels: str) -> Iterator[Any]:
    ps = backend.client.pubsub()
    ps.subscribe(*channels)
    confirmed = 0
    while confirmed < len(channels):  # every confirmation first: a later quiet read then means no message
        m = ps.get_message(timeout=2.0)
        assert m is not None and m["type"] == "subscribe"
        confirmed += 1
    try:
        yield ps
    finally:
        ps.close()


def drain(ps: Any, quiet_s: float = 0.3) -> list[tuple[str, str]]:
    """Every message until none came for `quiet_s`: (channel, data)."""
    return [(ch, data.decode()) for ch, data in drain_raw(ps, quiet_s)]


def drain_raw(ps: Any, quiet_s: float = 0.3) -> list[tuple[str, bytes]]:
    got = []
    while (m := ps.get_message(timeout=quiet_s)) is not None:
        got.append((m["channel"].decode(), m["data"]))
    return got


def idle_members(backend: Any, lane: str, partition: int) -> list[str]:
    return [x.decode() for x in backend.client.zrange(PartitionKeys(partition).lane(lane).idle, 0, -1)]


def home(client: Client, lane: str) -> int:
    return client.mint(lane).partition_index


def test_a_short_claim_lists_a_listening_worker_as_idle_and_a_full_one_takes_it_off(backend):
    c = Client(backend)
    w = Worker(backend, WorkerConfig(lanes=("wi",), concurrency=8), Registry())
    n = home(c, "wi")
    c.create(kind="k", lane="wi", payload=b"")
    assert w.claim_next(4) and idle_members(backend, "wi", n) == []  # not listening: never listed
    w.claimer.listening = True
    c.create_many([{"kind": "k", "lane": "wi", "payload": b""} for _ in range(2)])
    assert len(w.claim_next(2)) == 2  # full: may have no slot left
    assert idle_members(backend, "wi", n) == []
    c.create(kind="k", lane="wi", payload=b"")
    assert len(w.claim_next(4)) == 1  # short: it has a free slot
    # Listed with its lease parameters: it takes hand-offs (tests/ffcore/test_handoff.py).
    member = F.idle_member(w.config.worker_id, w.config.worker_instance_id, w.config.lease_ttl_ms, 8)
    assert member.startswith(w.config.worker_instance_id + "\t")
    assert idle_members(backend, "wi", n) == [member]
    assert len(w.claim_next(1)) == 0
    assert idle_members(backend, "wi", n) == [member]


def test_a_create_tells_the_worker_idle_longest_alone_and_takes_it_off_the_set(backend):
    c = Client(backend)
    lane = "wo"
    n = home(c, lane)
    idle = PartitionKeys(n).lane(lane).idle
    backend.client.zadd(idle, {"w-old": 1, "w-new": 2})
    with subscribed(backend, keys.lane_wake(lane), keys.worker_wake("w-old"), keys.worker_wake("w-new")) as ps:
        c.create(kind="k", lane=lane, payload=b"")
        got = drain(ps)
    assert got == [(keys.worker_wake("w-old"), f"{lane} {n}")]
    assert wake.parse_own(got[0][1].encode()) == {lane: [n]}
    assert idle_members(backend, lane, n) == ["w-new"]


def test_nobody_idle_or_nobody_listening_tells_every_worker_of_the_lane(backend):
    c = Client(backend)
    lane = "wb"
    n = home(c, lane)
    backend.client.zadd(PartitionKeys(n).lane(lane).idle, {"w-gone": 1})
    with subscribed(backend, keys.lane_wake(lane)) as ps:
        c.create(kind="k", lane=lane, payload=b"")  # w-gone listens nowhere: the lane channel
        c.create(kind="k", lane=lane, payload=b"")  # the set is empty now: the lane channel
        got = drain(ps)
    assert got == [(keys.lane_wake(lane), str(n))] * 2
    assert idle_members(backend, lane, n) == []


def test_work_that_needs_capabilities_tells_every_worker_and_keeps_the_idle_set(backend):
    """The worker idle longest may lack the capabilities: all are told (the hint naming them), the capable ones
    claim it."""
    c = Client(backend)
    lane = "wc"
    n = home(c, lane)
    backend.client.zadd(PartitionKeys(n).lane(lane).idle, {"w-plain": 1})
    with subscribed(backend, keys.lane_wake(lane), keys.worker_wake("w-plain")) as ps:
        c.create(kind="k", lane=lane, payload=b"", policy=Policy(required_capabilities=("gpu",)))
        got = drain(ps)
    assert got == [(keys.lane_wake(lane), f"{n} gpu")]
    assert idle_members(backend, lane, n) == ["w-plain"]


def test_a_delayed_or_duplicate_create_wakes_nobody_and_keeps_the_idle_set(backend):
    c = Client(backend)
    lane = "wd"
    n = home(c, lane)
    backend.client.zadd(PartitionKeys(n).lane(lane).idle, {"w-1": 1})
    with subscribed(backend, keys.lane_wake(lane), keys.worker_wake("w-1")) as ps:
        c.create(kind="k", lane=lane, payload=b"", delay_until=backend.now_ms() + 60_000)
        first = c.create(kind="k", lane=lane, payload=b"", idempotency_key="same")
        got = drain(ps)
        assert len(got) == 1  # the keyed create was made: one wake
        c.create(kind="k", lane=lane, payload=b"", idempotency_key="same")  # a duplicate
        assert drain(ps) == []
    assert ExecutionId(str(first.execution_id)).partition_index == n


def test_running_workers_each_task_is_handed_to_one_of_them_and_every_task_runs(backend):
    """Two running workers of a lane, tasks created one at a time: each create hands its task to one worker on
    its own channel (none goes to the lane channel once both are idle), and every task runs exactly once."""
    lane = "wr"
    ran: list[str] = []
    lock = threading.Lock()
    reg = Registry()

    @reg.handler("k")
    def run(task: Any) -> None:
        with lock:
            ran.append(str(task.execution_id))

    workers = [Worker(backend, WorkerConfig(lanes=(lane,), concurrency=4, poll_interval_ms=5_000), reg)
               for _ in range(2)]
    threads = [threading.Thread(target=w.run, kwargs={"install_signal_handlers": False}, daemon=True)
               for w in workers]
    for t in threads:
        t.start()
    c = Client(backend)
    n = home(c, lane)
    try:
        # The first create tells every worker (nobody is listed yet: a worker is listed by a claim on the
        # partition, and its lane registry names no partition before work was created there).
        first = str(c.create(kind="k", lane=lane, payload=b"").execution_id)
        deadline = time.monotonic() + 10
        while len(idle_members(backend, lane, n)) < 2 or first not in ran:  # both listed by short claims
            assert time.monotonic() < deadline, "the workers never listed themselves as idle"
            time.sleep(0.02)
        own = [keys.worker_wake(w.config.worker_instance_id) for w in workers]
        with subscribed(backend, keys.lane_wake(lane), *own) as ps:
            made = []
            for _ in range(20):
                made.append(str(c.create(kind="k", lane=lane, payload=b"").execution_id))
                deadline = time.monotonic() + 5
                while made[-1] not in ran:  # one at a time: the next create finds an idle worker again
                    assert time.monotonic() < deadline, "a task was not run within 5 s (a lost wake?)"
                    time.sleep(0.002)
                deadline = time.monotonic() + 5
                while not idle_members(backend, lane, n):
                    assert time.monotonic() < deadline
                    time.sleep(0.002)
            got = drain_raw(ps)
        assert sorted(ran) == sorted([first, *made])
        assert len(got) == 20 and {ch for ch, _ in got} <= set(own)
        # Each create handed over its own task (nothing else waited), claimed for the worker it told.
        handed = [F.parse_handoff(data) for _, data in got]
        assert [c.execution_id for _, _, c in handed] == made
        assert all(ln == lane and part == n for ln, part, _ in handed)
        assert sum(w.handoffs for w in workers) == 20
    finally:
        for w in workers:
            w.stop()
        for t in threads:
            t.join(10)
    # Stopped workers are off the idle set: the next create tells the lane channel, not a worker that left.
    assert idle_members(backend, lane, n) == []
