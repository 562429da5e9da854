"""A worker fed one task at a time makes about one claim per task, each sized for what arrives (issue #21):
no second, empty claim after every completion, and no 64 id pairs minted for one task."""

from __future__ import annotations

import threading
import time
from typing import Any

from ffcore.execution.client import Client
from ffcore.policy import Policy
from ffcore.worker.worker import WAKE_CLAIM, Registry, Worker, WorkerConfig


def _run(backend: Any, *, tasks: int, gap_s: float, concurrency: int = 64, stored: int = 0,
         caps: tuple[str, ...] = (), poll_ms: int = 60_000, hold_s: float = 0.0) -> tuple[list[int], int]:
    """Create `tasks` one at a time `gap_s` apart on a running worker (after `stored` waiting ones), needing the
    capabilities `caps` the worker has; the sizes of its claims, and how many tasks ran."""
    ran: list[str] = []
    reg = Registry()

    @reg.handler("*")
    def body(task: Any) -> None:
        time.sleep(hold_s)
        ran.append(str(task.execution_id))

    # A long poll interval: what is measured is the claims work arrival causes, not idle polling.
    w = Worker(backend, WorkerConfig(lanes=("one",), concurrency=concurrency, poll_interval_ms=poll_ms,
                                     capabilities=caps), reg)
    sizes: list[int] = []
    real = w.claimer.claim

    def spy(max_tasks: int) -> Any:
        sizes.append(max_tasks)
        return real(max_tasks)

    w.claimer.claim = spy  # type: ignore[method-assign]
    c = Client(backend)
    if stored:
        c.create_many([{"kind": "k", "lane": "one", "payload": b""} for _ in range(stored)])
    th = threading.Thread(target=w.run, kwargs={"install_signal_handlers": False}, daemon=True)
    th.start()
    try:
        if not stored:
            time.sleep(0.3)  # past the loop's first polls
            sizes.clear()
        for _ in range(tasks):
            c.create(kind="k", lane="one", payload=b"", policy=Policy(required_capabilities=caps))
            time.sleep(gap_s)
        deadline = time.monotonic() + 10
        while len(ran) < tasks + stored and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        w.stop()
        th.join(5)
    return sizes, len(ran)


def test_one_task_at_a_time_costs_about_one_small_claim_each(backend):
    sizes, ran = _run(backend, tasks=30, gap_s=0.04)
    assert ran == 30
    # Before: a wake claim plus the claim loop's own after each completion (about 2 per task), each of the
    # loop's asking for all 64 free slots.
    assert len(sizes) <= 30 * 1.5, sizes
    assert max(sizes) <= 2 * WAKE_CLAIM, sizes


def test_stored_work_grows_the_claims_until_they_take_what_waits(backend):
    sizes, ran = _run(backend, tasks=0, gap_s=0, stored=300)
    assert ran == 300
    assert sizes[0] == WAKE_CLAIM and max(sizes) >= 16, sizes  # 4, 8, 16, … (bounded by the free slots)
    assert len(sizes) <= 40, sizes  # completions claim their successors; the loop is not woken per task


def test_a_single_slot_worker_handed_its_tasks_makes_no_claim_per_task(backend):
    # S4's workers: one slot, capabilities, every task handed over by its create (the slot busy most of the time).
    # Its successor claim comes back short and lists it again; the claim loop, which polled while the slot was busy,
    # learnt nothing then and is not woken after the completion (it was: a claim, a probe, ≈ 15 thread switches).
    sizes, ran = _run(backend, tasks=30, gap_s=0.04, concurrency=1, caps=("gpu",), poll_ms=200, hold_s=0.03)
    assert ran == 30
    assert len(sizes) <= 4, sizes  # the loop's polls while the slot was free (7 here when it was woken too)
