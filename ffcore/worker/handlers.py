"""Where handlers run, and the threads a worker has: quick sync handlers on the driver's own thread, slow ones on a
worker's bounded pool, async ones on the process's one event loop; the watchdog that hands the driver to a pool
thread when a handler it runs itself outlives INLINE_WATCH_S (ffcore.worker.driver).

This is the only module of ffcore.worker that starts threads (the driver starts on the thread that called
`Worker.run`). No handler talks to Valkey for the worker: a handler's result goes back to the driver, which
records it.

A pool thread is started only when a job finds none free, up to the pool's size: a worker fed one task at a
time keeps running it on the same warm thread instead of rotating over all of them (and a successor its result
brings back is often queued before that thread looks for more: it runs it without sleeping in between).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import select
import socket
import threading
import time
from collections import deque
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


class Inline:
    """Sync handlers the driver runs on its own thread (`ready`, run between its turns by `run_ready`), and the
    hand-over of the driver when one of them outlives `watch_s`: the watchdog deposes the thread running it and a
    pool thread drives from then on (`lead`); the deposed thread reports its handler's result like a pool thread
    and drives no more. Cheaper than the pool (no thread hand-off per task) while handlers are quick."""

    def __init__(self, pool: Pool, watch_s: float) -> None:
        self.pool = pool
        self.watch_s = watch_s
        #: Handler jobs for the driving thread (appended and run only by whichever thread drives).
        self.ready: deque[Callable[[], object]] = deque()
        self._lock = threading.Lock()
        #: The driving thread's ident (None between a deposition and the new driver's start).
        self.leader: int | None = None
        #: When the job running on the driving thread started (None: none runs); jobs run so far.
        self._since: float | None = None
        self._runs = self._seen = 0
        self._lead: Callable[[], None] = lambda: None
        self._watchdog: Watchdog | None = None
        #: Hand-overs so far (tests, benchmarks).
        self.hand_overs = 0

    def start(self, lead: Callable[[], None]) -> None:
        """A pool thread drives (`lead`), and takes over again after each hand-over."""
        self._lead = lead
        self._watchdog = Watchdog(self._check, self.watch_s)
        self.pool.submit(self._take_over, lambda _: None)

    def close(self) -> None:
        if self._watchdog is not None:
            self._watchdog.close()
            self._watchdog = None
        self.ready.clear()

    def run_ready(self) -> bool:
        """Run the ready jobs here; False once this thread was deposed (another one drives now)."""
        me = threading.get_ident()
        while self.ready:
            job = self.ready.popleft()
            if (wd := self._watchdog) is not None:
                wd.poke()
            self._runs += 1
            self._since = time.monotonic()
            try:
                job()
            except Exception:  # a bug must not end the driver
                log.exception("handler error")
            with self._lock:
                if self.leader != me:
                    return False  # `_since` is the new driver's now
                self._since = None
        return True

    def _check(self) -> bool:
        with self._lock:
            since, busy, self._seen = self._since, self._since is not None or self._runs != self._seen, self._runs
            if since is None or time.monotonic() - since < self.watch_s:
                return busy
            self._since = self.leader = None
            self.hand_overs += 1
        self.pool.submit(self._take_over, lambda _: None)
        return True

    def _take_over(self) -> None:
        self.leader = threading.get_ident()
        self._lead()


class Doorbell:
    """How other threads wake the driver from its select(): a socket pair, written only while the driver is (about to
    be) asleep — under the GIL either the driver sees the news before select(), or the ringer sees it asleep."""

    def __init__(self) -> None:
        self._rx: socket.socket | None = None
        self._tx: socket.socket | None = None
        self._asleep = False

    def open(self) -> None:
        self._rx, self._tx = socket.socketpair()
        self._rx.setblocking(False)
        self._tx.setblocking(False)

    def close(self) -> None:
        rx, tx, self._rx, self._tx = self._rx, self._tx, None, None
        for end in (rx, tx):
            if end is not None:
                end.close()

    def ring(self, always: bool = False) -> None:
        if (self._asleep or always) and (tx := self._tx) is not None:
            with contextlib.suppress(OSError):  # full (a wake-up is pending anyway) or closed
                tx.send(b"\0")

    def sleep(self, until: float, fd: int | None, news: Callable[[], bool]) -> None:
        """Until monotonic `until` (at most a second), a ring, or `fd` readable; not at all when `news()`."""
        self._asleep = True
        try:
            if news():
                return
            timeout = until - time.monotonic()
            if timeout > 0:
                select.select([f for f in (self._rx, fd) if f is not None], [], [], min(timeout, 1.0))
        finally:
            self._asleep = False
            with contextlib.suppress(BlockingIOError):
                while self._rx is not None and self._rx.recv(4096):
                    pass


#: How often a parked watchdog still checks (s).
PARKED_CHECK_S = 0.25


class Watchdog:
    """A thread calling `check()` every `every_s`; once `check()` said "nothing to watch" for a second it parks (a check
    every PARKED_CHECK_S) until `poke()`. Cheap both idle and under load: a few dozen checks a second at most, and
    only a parked watchdog is woken."""

    def __init__(self, check: Callable[[], bool], every_s: float, name: str = "ff-watch") -> None:
        self.check = check
        self.every_s = every_s
        self.parked = False
        self._wake = threading.Event()
        self._closed = False
        self._thread = threading.Thread(target=self._watch, name=name, daemon=True)
        self._thread.start()

    def poke(self) -> None:
        if self.parked:
            self.parked = False
            self._wake.set()

    def close(self) -> None:
        self._closed = True
        self._wake.set()
        self._thread.join(timeout=5)

    def _watch(self) -> None:
        quiet_since = time.monotonic()
        while not self._closed:
            if self.parked:
                # A poke that raced the parking is caught by the next timed check (a few per second).
                self._wake.wait(PARKED_CHECK_S)
                self._wake.clear()
            else:
                time.sleep(self.every_s)
            try:
                busy = self.check()
            except Exception:  # a bug must not end the watch
                log.exception("watchdog error")
                busy = False
            now = time.monotonic()
            if busy:
                quiet_since = now
                self.parked = False
            elif not self.parked and now - quiet_since >= 1.0:
                self.parked = True


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
