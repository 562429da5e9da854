"""The worker's driver (ffcore.worker.driver) and where handlers run (ffcore.worker.handlers).

Covered: one write records a batch in which one lease was lost (that task learns it, the others complete); a
lost reply is sent again and reconciled (quota slot given back); a refused completion that wanted a successor
claims none; a second terminal call raises TaskConsumed; a run completes everything through batch calls; a stop
past the drain window hands running tasks back (run() returns while they hang); a handler running longer than
its lease keeps it; async handlers of every worker share the process's one event loop; quick sync handlers run
on the driving thread; a slow one hands the driver to a pool thread once, and its kind then runs on the bounded
pool; an idle driver sleeps; the package's structure limits (one module starts threads).
"""

from __future__ import annotations

import ast
import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import redis

import ffcore.worker
from ffcore.budgets.quotas import create_quota_policy
from ffcore.execution.client import Client
from ffcore.keys import ExecKeys
from ffcore.worker import handlers
from ffcore.worker.driver import _Done
from ffcore.worker.task import ClaimedTask, TaskConsumed
from ffcore.worker.worker import Registry, Worker, WorkerConfig

from .budgetkit import admitted, attached, in_flight
from .invariants import WIID, WORKER, check, create
from .workerkit import running

BATCH = "ff_complete_batch_and_claim"


def _worker(backend, reg: Registry | None = None, **cfg: Any) -> Worker:
    return Worker(backend, WorkerConfig(worker_id=WORKER, worker_instance_id=WIID, **cfg), reg or Registry())


def _claim(w: Worker, n: int) -> list[ClaimedTask]:
    tasks: list[ClaimedTask] = []
    for _ in range(10):
        tasks += w.claim_next(n - len(tasks))
        if len(tasks) == n:
            return tasks
    raise AssertionError(f"claimed {len(tasks)} of {n}")


def _record(w: Worker, results: list[tuple[ClaimedTask, bytes]], *, want: bool = False) -> None:
    """What the driver's turn does with handlers' results: queue them, then one write (no run loop needed)."""
    for t, r in results:
        t.begin_terminal()
        w.driver._pending.append(_Done(t, r, want))
    w.driver._commit(time.monotonic())


def _completed(backend, eid: str) -> bool:
    # One field, read atomically (check() reads several keys: not while the worker moves them).
    return backend.client.hget(ExecKeys(eid).core, "public_state") == b"completed"


def _until(ok, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not ok():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


# ------------------------------------------------------------------ the write
def test_a_lost_lease_in_a_batch_is_marked_lost_while_its_batch_mates_complete(backend):
    w = _worker(backend)
    for _ in range(3):
        create(backend)
    first, bad, ok = _claim(w, 3)
    Client(backend).revoke_lease(bad.execution_id, reason="test")
    _record(w, [(first, b"first"), (bad, b"bad"), (ok, b"ok")])
    assert w.driver.calls == 1 and w.driver.completions == 3  # one call for the partition and lane
    assert bad.lease_lost.is_set() and bad.lost_reason == "lease_revoked"
    assert not ok.lease_lost.is_set() and Client(backend).get_result(ok.execution_id) == b"ok"
    assert Client(backend).get_result(first.execution_id) == b"first"
    assert check(backend, bad.execution_id)["lifecycle_phase"] == "active"
    assert w.in_flight == {}  # every slot is free again, the refused one too


def test_a_lost_reply_is_sent_again_next_turn_and_reconciled_giving_back_the_quota_slot(backend, monkeypatch):
    qid, _ = create_quota_policy(backend, window_seconds=0, max_concurrent=2)
    attached(backend, 1, quota=qid)
    w = _worker(backend)
    (task,) = _claim(w, 1)
    assert in_flight(backend, qid) == 1
    real, sent = backend.call_many, []

    def applied_then_dropped(calls, **kw):
        replies = real(calls, **kw)
        sent.append([c.function for c in calls])
        if len(sent) == 1:
            raise redis.ConnectionError("connection reset after send")
        return replies

    monkeypatch.setattr(backend, "call_many", applied_then_dropped)
    _record(w, [(task, b"once")])
    assert task.execution_id in w.in_flight  # kept (and its lease renewed) until the retry is answered
    w.driver._commit(w.driver._write_at)
    assert sent == [[BATCH], [BATCH]] and not task.lease_lost.is_set()
    assert Client(backend).get_result(task.execution_id) == b"once"
    assert check(backend, task.execution_id)["public_state"] == "completed"
    assert in_flight(backend, qid) == 0 and admitted(backend, qid) == set() and w.in_flight == {}


def test_a_refused_completion_that_wanted_a_successor_claims_none(backend):
    w = _worker(backend)
    create(backend)
    (bad,) = _claim(w, 1)
    waiting = create(backend)
    Client(backend).revoke_lease(bad.execution_id, reason="test")
    _record(w, [(bad, b"x")], want=True)
    assert bad.lost_reason == "lease_revoked"
    assert check(backend, waiting)["public_state"] == "waiting" and w.in_flight == {}


def test_a_second_terminal_call_after_the_drivers_completion_raises_task_consumed(backend):
    create(backend)
    w = _worker(backend)
    (task,) = _claim(w, 1)
    _record(w, [(task, b"once")])
    with pytest.raises(TaskConsumed):
        task.complete(b"twice")
    assert Client(backend).get_result(task.execution_id) == b"once" and w.driver.calls == 1


# ------------------------------------------------------------------ the run loop
def test_a_run_completes_every_task_through_batch_calls(backend):
    client = Client(backend)
    n = 48
    eids = [r.execution_id for r in client.create_many([{"kind": "job", "lane": "gc", "payload": f'{{"i": {i}}}'}
                                                        for i in range(n)])]
    reg = Registry()

    @reg.handler("job")
    def run(task: ClaimedTask) -> dict[str, int]:
        return {"twice": task.json()["i"] * 2}

    w = Worker(backend, WorkerConfig(lanes=("gc",), concurrency=8, poll_interval_ms=20), reg)
    with running([w]):
        _until(lambda: w.driver.completions >= n, 30)
    for i, e in enumerate(eids):
        c = check(backend, e)
        assert (c["public_state"], c["total_attempt_count"]) == ("completed", "1"), e
        assert client.get_result(e) == f'{{"twice":{2 * i}}}'.encode()
    assert w.driver.completions == n and 1 <= w.driver.calls <= n
    assert w.pool.threads <= 8


def test_a_stop_past_the_drain_window_hands_running_tasks_back_and_records_nothing_later(backend):
    client = Client(backend)
    eids = [r.execution_id for r in client.create_many([{"kind": "slow", "lane": "gc"} for _ in range(6)])]
    started: list[str] = []
    let_go, returned = threading.Event(), threading.Event()
    reg = Registry()

    @reg.handler("slow")
    def run(task: ClaimedTask) -> bytes:
        started.append(task.execution_id)
        let_go.wait(10)
        if len(started) >= 2:
            returned.set()
        return b"done"

    w = Worker(backend, WorkerConfig(lanes=("gc",), concurrency=2, poll_interval_ms=20, drain_timeout_s=0.2), reg)
    t = threading.Thread(target=w.run, kwargs={"install_signal_handlers": False}, daemon=True)
    t.start()
    _until(lambda: len(started) >= 2)
    w.stop()
    t.join(timeout=15)
    # run() returned while both handlers still hang (the first one ran on the thread that was driving).
    assert not t.is_alive() and len(started) == 2 and not returned.is_set()
    let_go.set()
    assert returned.wait(5)
    time.sleep(0.3)  # anything a handler would still record has happened by now
    assert len(started) == 2 and w.driver.completions == 0
    states = {e: check(backend, e)["public_state"] for e in eids}
    assert "active" not in states.values() and "completed" not in states.values(), states
    assert all(client.get_result(e) is None for e in eids)
    assert w.in_flight == {}


def test_a_handler_running_longer_than_its_lease_keeps_it(backend):
    eid = Client(backend).create(kind="long", lane="ll").execution_id
    expiries: list[int] = []
    reg = Registry()

    @reg.handler("long")
    def long(task: ClaimedTask) -> bytes:
        first = task.lease_expires_at
        time.sleep(1.5)  # 2.5 TTLs: the lease would be gone without the driver's renewals
        expiries.extend([first, task.lease_expires_at])
        assert not task.lease_lost.is_set()
        return b"late"

    w = Worker(backend, WorkerConfig(lanes=("ll",), lease_ttl_ms=600), reg)
    with running([w]):
        _until(lambda: _completed(backend, eid))
    assert expiries[1] >= expiries[0] + 900  # renewed (at least twice) while it ran
    assert w.inline.hand_overs == 1  # it started on the driving thread, which then handed the driver over
    c = check(backend, eid)
    assert c["total_attempt_count"] == "1" and Client(backend).get_result(eid) == b"late"


def test_async_handlers_of_every_worker_share_the_processs_one_event_loop(backend):
    loops: list[tuple[int, str]] = []
    reg = Registry()

    @reg.handler("a")
    async def on_loop(task: ClaimedTask) -> dict[str, int]:
        await asyncio.sleep(0.01)
        loops.append((id(asyncio.get_running_loop()), threading.current_thread().name))
        return {"ok": 1}

    eids = [r.execution_id for r in Client(backend).create_many([{"kind": "a", "lane": "as"} for _ in range(6)])]
    workers = [Worker(backend, WorkerConfig(lanes=("as",), concurrency=3, poll_interval_ms=20), reg) for _ in range(2)]
    with running(workers):
        _until(lambda: all(_completed(backend, e) for e in eids))
    assert len(loops) == 6
    assert set(loops) == {(id(handlers.loop()), "ff-async")}  # one loop, one thread, no asyncio.run per task
    assert all(w.pool.threads == 1 for w in workers)  # the driving thread only: none started for handlers


def test_quick_sync_handlers_run_on_the_driving_thread_and_start_no_pool_thread(backend):
    names: list[str] = []
    reg = Registry()

    @reg.handler("in")
    def run(task: ClaimedTask) -> str:
        names.append(threading.current_thread().name)
        return "ok"

    w = Worker(backend, WorkerConfig(lanes=("inl",), concurrency=8), reg)
    client = Client(backend)
    with running([w]):
        eid = client.create(kind="in", lane="inl").execution_id  # one by hand-off
        _until(lambda: _completed(backend, eid))
        many = [r.execution_id for r in client.create_many([{"kind": "in", "lane": "inl"} for _ in range(10)])]
        _until(lambda: all(_completed(backend, e) for e in many))
    assert set(names) == {"ff-task-0"} and len(names) == 11  # the one thread that drives
    assert w.pool.threads == 1 and w.inline.hand_overs == 0 and w.driver.completions == 11


def test_a_slow_sync_handler_hands_the_driver_to_a_pool_thread_once_then_its_kind_runs_on_the_pool(backend):
    names: list[str] = []
    now = {"n": 0, "max": 0}
    lock = threading.Lock()
    reg = Registry()

    @reg.handler("s")
    def run(task: ClaimedTask) -> None:
        with lock:
            now["n"] += 1
            now["max"] = max(now["max"], now["n"])
        names.append(threading.current_thread().name)
        time.sleep(0.1)
        with lock:
            now["n"] -= 1

    w = Worker(backend, WorkerConfig(lanes=("sy",), concurrency=3, poll_interval_ms=20), reg)
    client = Client(backend)
    with running([w]):
        for _ in range(2):  # one at a time
            eid = client.create(kind="s", lane="sy").execution_id
            _until(lambda e=eid: _completed(backend, e))
        many = [r.execution_id for r in client.create_many([{"kind": "s", "lane": "sy"} for _ in range(9)])]
        _until(lambda: all(_completed(backend, e) for e in many))
    # The first ran on the driving thread until the watchdog handed the driver over (to ff-task-1); the rest ran on
    # the pool's other threads, the deposed one included.
    assert names[0] == "ff-task-0" and "ff-task-1" not in names
    assert w.inline.hand_overs == 1
    assert now["max"] == 3 and w.pool.threads <= 4  # the slots, plus the thread that drives now


def test_an_idle_driver_sleeps_between_its_polls(backend):
    w = Worker(backend, WorkerConfig(lanes=("idle-d",), poll_interval_ms=200, listening_poll_interval_ms=1000,
                                     heartbeat_interval_ms=60_000, reclaim_interval_ms=60_000), Registry())
    with running([w]):
        time.sleep(1.2)  # past the back-off from 5 ms
        turns = w.driver.turns
        time.sleep(1.0)
        assert w.driver.turns - turns <= 3  # about one poll a second, not a busy loop


# ------------------------------------------------------------------ structure
WORKER_DIR = Path(ffcore.worker.__file__).parent


def test_only_one_worker_module_starts_threads():
    def starts(text: str) -> int:
        return sum(text.count(s) for s in ("Thread(", "Timer(", "Executor(", "asyncio.run("))

    sites = {p.name: n for p in WORKER_DIR.glob("*.py") if (n := starts(p.read_text()))}
    assert sites == {"handlers.py": 3}  # the pool's threads, the watchdog, the process's event loop


def test_the_worker_package_stays_small():
    modules = list(WORKER_DIR.glob("*.py"))
    assert len(modules) <= 12, sorted(p.name for p in modules)
    long = {p.name: n for p in modules if (n := len(p.read_text().splitlines())) > 450}
    assert not long
    tree = ast.parse((WORKER_DIR / "worker.py").read_text())
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Worker"]
    assert cls.end_lineno is not None and cls.end_lineno - cls.lineno + 1 < 250
