"""Where handlers run: sync ones on a worker's bounded pool of threads, async ones on the process's one event loop.

This is the only module of ffcore.worker that starts threads (the driver runs on the thread that called
`Worker.run`). Neither side talks to Valkey for the worker: a handler's result goes back to the driver, which
records it (ffcore.worker.driver).

A pool thread is started only when a job finds none free, up to the pool's size: a worker fed one task at a
time keeps running it on the same warm thread instead of rotating over all of them (and a successor its result
brings back is often queued before that thread looks for more: it runs it without sleeping in between).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from queue import SimpleQueue
from typing import Any, TypeVar

log = logging.getLogger("ffcore.worker.handlers")

T = TypeVar("T")
#: A job runs the handler; its `then` reports the outcome once the thread already counts as free again (so the
#: successor the report brings is queued for this very thread, not a new one).
Job = tuple[Callable[[], T], Callable[[T], None]]


class Pool:
    """Up to `size` threads running jobs in order; `close()` ends them once the jobs queued before it ran."""

    def __init__(self, size: int, name: str = "ff-task") -> None:
        self.size = max(1, size)
        self.name = name
        self._jobs: SimpleQueue[Job[Any] | None] = SimpleQueue()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        #: Jobs submitted and not yet done (their `then` aside).
        self._busy = 0

    @property
    def threads(self) -> int:
        return len(self._threads)

    def submit(self, job: Callable[[], T], then: Callable[[T], None]) -> None:
        with self._lock:
            self._busy += 1
            spawn = None
            if self._busy > len(self._threads) and len(self._threads) < self.size:
                spawn = threading.Thread(target=self._work, name=f"{self.name}-{len(self._threads)}", daemon=True)
                self._threads.append(spawn)
        self._jobs.put((job, then))
        if spawn is not None:
            spawn.start()

    def close(self) -> None:
        with self._lock:
            n = len(self._threads)
        for _ in range(n):
            self._jobs.put(None)

    def _work(self) -> None:
        while (item := self._jobs.get()) is not None:
            job, then = item
            try:
                out = job()
            except Exception:  # a bug must not cost the worker a handler thread
                log.exception("handler thread error")
                out = None
            with self._lock:
                self._busy -= 1
            try:
                then(out)
            except Exception:
                log.exception("handler thread error")


#: The process's event loop for async handlers, by pid (a forked child starts its own).
_loops: dict[int, asyncio.AbstractEventLoop] = {}
_loops_lock = threading.Lock()


def loop() -> asyncio.AbstractEventLoop:
    """The process's event loop for async handlers, running on a thread of its own from the first call on."""
    pid = os.getpid()
    with _loops_lock:
        lp = _loops.get(pid)
        if lp is None:
            lp = _loops[pid] = asyncio.new_event_loop()
            threading.Thread(target=lp.run_forever, name="ff-async", daemon=True).start()
        return lp


def run_async(coro: Coroutine[Any, Any, T]) -> Future[T]:
    """Schedule `coro` on the process's event loop (every async handler of every worker shares it)."""
    return asyncio.run_coroutine_threadsafe(coro, loop())
