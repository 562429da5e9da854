"""The queue between a worker's claims and its handler threads.

Tasks are served in order, but to the handler thread that went idle LAST: under light load the same one or
two threads run everything, with their stacks, their connection and the CPU caches warm, instead of the
work rotating over all 64 threads of a large pool (a FIFO queue wakes the thread that has waited longest).
Issue #21: one task at a time, a 64-thread worker cost ≈ 20 % more CPU per task than a 4-thread one.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Generic, TypeVar

T = TypeVar("T")


class ReadyQueue(Generic[T]):
    """FIFO for items, LIFO for the threads waiting on it; put() never blocks.

    An item is not bound to the thread it wakes: a thread that comes back for more while that one is still
    waking takes it at once (under load, threads finishing tasks keep taking the queued ones without a sleep
    and a wake each); the woken thread then finds nothing and waits again."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: deque[T] = deque()
        #: Parked threads' gates (held locks a put() releases), the last parked on top.
        self._idle: list[threading.Lock] = []
        self._local = threading.local()

    def put(self, item: T) -> None:
        with self._lock:
            self._items.append(item)
            if not self._idle:
                return
            gate = self._idle.pop()
        gate.release()

    def get(self) -> T:
        """The oldest item; blocks until there is one."""
        gate: threading.Lock | None = getattr(self._local, "gate", None)
        if gate is None:
            gate = self._local.gate = threading.Lock()
            gate.acquire()
        while True:
            with self._lock:
                if self._items:
                    return self._items.popleft()
                self._idle.append(gate)
            gate.acquire()  # released by the put() that popped it (once per park)
