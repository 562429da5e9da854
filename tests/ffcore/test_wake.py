"""Wake hints: creates and satisfied edges announce the partitions that got work; workers use them."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ffcore import keys, wake
from ffcore.execution.client import Client
from ffcore.flows.dag import resolve_outgoing
from ffcore.flows.flows import Flows
from ffcore.ids import ExecutionId
from ffcore.worker.worker import Registry, Worker, WorkerConfig
from tests.pubsub_support import confirmed_pubsub

from .invariants import claim, complete


@contextmanager
def listening(backend: Any, lane: str) -> Iterator[Any]:
    ps = confirmed_pubsub(backend.client, keys.lane_wake(lane))
    try:
        yield ps
    finally:
        ps.close()


def next_message(ps: Any, timeout_s: float = 2.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if (m := ps.get_message(timeout=0.1)) is not None:
            return m
    raise AssertionError("no wake message")


def test_the_message_round_trips_partitions_and_ignores_junk():
    assert wake.message([7, 3, 7]) == "3,7"
    assert wake.parse(b"3,7") == [3, 7]
    assert wake.parse("1") == [1]
    assert wake.parse(b"x,,-2,5") == [5]
    assert wake.parse(None) == []
    # Work needing capabilities: the list follows the partitions (a worker lacking them ignores the hint).
    assert wake.parse_hint(b"4 cpu,gpu") == ([4], "cpu,gpu")
    assert wake.parse_hint(b"4") == ([4], "")
    assert wake.parse(b"4 gpu") == [4]


def test_a_create_announces_the_partition_of_the_new_execution(backend):
    with listening(backend, "wl") as ps:
        r = Client(backend).create(kind="k", lane="wl", payload=b"")
        m = next_message(ps)
    assert wake.parse(m["data"]) == [r.execution_id.partition_index]


def test_a_delayed_create_announces_nothing(backend):
    with listening(backend, "wl") as ps:
        Client(backend).create(kind="k", lane="wl", payload=b"", delay_until=backend.now_ms() + 60_000)
        assert ps.get_message(timeout=0.3) is None


def test_a_satisfied_edge_announces_the_childs_partition(backend):
    flows = Flows(backend)
    fid = flows.create(kind="pair")
    up, down = flows.build(fid, [{"kind": "a", "lane": "wf"}, {"kind": "b", "lane": "wf"}], edges=[(0, 1)])
    w = Worker(backend, WorkerConfig(lanes=("wf",), concurrency=1), Registry())
    (t,) = w.claim_next(1)
    assert t.execution_id == up
    t.complete(b"")
    with listening(backend, "wf") as ps:
        rep = resolve_outgoing(backend, [(str(up), fid, "success")])
        m = next_message(ps)
    assert rep.satisfied == 1
    assert wake.parse(m["data"]) == [ExecutionId(str(down)).partition_index]


def test_a_hint_lets_a_worker_claim_on_a_partition_its_registry_does_not_name(backend):
    c = Client(backend)
    w = Worker(backend, WorkerConfig(lanes=("wh",), concurrency=1), Registry())
    assert w.claim_next(1) == []  # reads the (empty) registry and probes the ring once
    # An execution created outside ffcore's create (no registry entry), e.g. by another client.
    call = c.create_call(kind="k", lane="wh", payload=b"")
    eid = ExecutionId(str(backend.call(call)[0]))
    w.claimer._ring_at = time.monotonic()  # the ring probe is not due
    w.claimer._registry = [(eid.partition_index + 1, "wh")]  # a registry that misses the partition
    w.claimer._registry_at = time.monotonic()
    assert w.claim_next(1) == []
    w.claimer.hint("wh", [eid.partition_index])
    w.claimer.hint("other-lane", [0])  # lanes the worker does not serve are ignored
    (t,) = w.claim_next(1)
    assert t.execution_id == eid
    assert all(lane == "wh" for _, lane in w.claimer._registry)


def test_a_running_worker_picks_up_a_flow_child_without_waiting_for_its_poll(backend):
    flows = Flows(backend)
    fid = flows.create(kind="pair")
    # The upstream runs elsewhere (a lane this worker does not serve), completed by the contract path.
    up, down = flows.build(fid, [{"kind": "a", "lane": "wr-up"}, {"kind": "b", "lane": "wr"}], edges=[(0, 1)])
    complete(backend, up, claim(backend, up, lane="wr-up"))
    ran: list[str] = []
    reg = Registry()

    @reg.handler("*")
    def record(task: Any) -> None:
        ran.append(task.kind)

    # A poll interval far longer than the test: only the wake hint can bring the child in time.
    w = Worker(backend, WorkerConfig(lanes=("wr",), concurrency=1, poll_interval_ms=60_000), reg)
    th = threading.Thread(target=w.run, kwargs={"install_signal_handlers": False}, daemon=True)
    th.start()
    try:
        # Idle for 1.5 s, its backoff (doubling from 5 ms) is in a 1.28 s wait that ends ~1 s from now.
        time.sleep(1.5)
        assert ran == []
        resolve_outgoing(backend, [(str(up), fid, "success")])
        deadline = time.monotonic() + 0.6
        while ran != ["b"] and time.monotonic() < deadline:
            time.sleep(0.01)
        assert ran == ["b"]
    finally:
        w.stop()
        th.join(5)
    assert Client(backend).get_state(str(down)) == "completed"


def test_a_hint_for_more_tasks_than_a_wake_claim_takes_wakes_the_claim_loop_for_the_rest(backend):
    from ffcore.worker.worker import WAKE_CLAIM

    n = WAKE_CLAIM + 6
    started: list[str] = []
    # Every handler waits until all n run at once: no completion can wake the loop for the rest.
    together = threading.Barrier(n, timeout=10)
    reg = Registry()

    @reg.handler("*")
    def hold(task: Any) -> None:
        started.append(str(task.execution_id))
        together.wait()

    w = Worker(backend, WorkerConfig(lanes=("wb",), concurrency=n, poll_interval_ms=60_000), reg)
    asked: list[tuple[str, int]] = []
    real_claim = w.claimer.claim

    def spy(max_tasks: int) -> Any:
        asked.append((threading.current_thread().name, max_tasks))
        return real_claim(max_tasks)

    w.claimer.claim = spy  # type: ignore[method-assign]
    th = threading.Thread(target=w.run, kwargs={"install_signal_handlers": False}, daemon=True)
    th.start()
    try:
        # Idle for 2.7 s, its backoff (doubling from 5 ms) is in a 2.56 s wait that ends ~2.4 s from now.
        time.sleep(2.7)
        asked.clear()
        Client(backend).create_many([{"kind": "k", "lane": "wb", "payload": b""} for _ in range(n)])
        deadline = time.monotonic() + 1.5
        while len(started) < n and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(started) == n
    finally:
        w.stop()
        th.join(5)
    # The hint's claim asked for a wake claim's worth; coming back full, the next claims took the rest at once
    # (on the driver: a pool thread, then the one it handed over to once a handler it ran blocked on the barrier).
    assert asked[0] == ("ff-task-0", WAKE_CLAIM)
    assert any(name.startswith("ff-task-") and size >= n - WAKE_CLAIM for name, size in asked[1:])
