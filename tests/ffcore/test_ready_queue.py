"""The worker's ready queue (ffcore/worker/ready.py): items in order, to the thread that went idle last."""

from __future__ import annotations

import threading
import time

from ffcore.worker.ready import ReadyQueue


def _waiting(q: ReadyQueue[str], n: int) -> None:
    deadline = time.monotonic() + 5
    while len(q._idle) < n:  # the test waits until each thread is parked
        assert time.monotonic() < deadline, "a thread never started waiting"
        time.sleep(0.001)


def test_items_come_out_in_the_order_they_went_in():
    q: ReadyQueue[str] = ReadyQueue()
    for item in "abc":
        q.put(item)
    assert len(q._items) == 3  # queued, nobody waiting
    assert [q.get(), q.get(), q.get()] == ["a", "b", "c"]
    assert not q._items


def test_the_thread_that_went_idle_last_gets_the_next_item():
    q: ReadyQueue[str] = ReadyQueue()
    got: dict[str, str] = {}

    def handler(name: str) -> None:
        got[name] = q.get()

    threads = []
    for i, name in enumerate(("first", "second", "third")):
        t = threading.Thread(target=handler, args=(name,))
        t.start()
        threads.append(t)
        _waiting(q, i + 1)
    q.put("x")
    threads[2].join(5)
    assert got == {"third": "x"}
    q.put("y")
    threads[1].join(5)
    assert got == {"third": "x", "second": "y"}
    q.put("z")
    threads[0].join(5)
    assert got == {"third": "x", "second": "y", "first": "z"}


def test_a_thread_reuses_its_place_and_never_gets_an_item_twice():
    q: ReadyQueue[int | None] = ReadyQueue()
    seen: list[int] = []

    def handler() -> None:
        while (item := q.get()) is not None:
            seen.append(item)

    workers = [threading.Thread(target=handler) for _ in range(4)]
    for t in workers:
        t.start()
    for i in range(2000):
        q.put(i)
    for _ in workers:
        q.put(None)  # one end marker per thread, as the worker's drain sends them
    for t in workers:
        t.join(10)
    assert not any(t.is_alive() for t in workers)
    assert sorted(seen) == list(range(2000))
