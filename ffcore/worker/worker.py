"""The worker: claims executions for its lanes, runs handlers, renews leases, shuts down gracefully.

    from ffcore.worker import handler

    @handler("resize")
    def resize(task):                  # or: async def resize(task)
        img = task.json()
        ...
        return {"ok": True}            # bytes/str/JSON-able -> complete(result); raise -> fail()

Run with `python manage.py ffworker --module myapp.handlers --lanes default`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import json
import logging
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import redis

from ffcore.backend import Backend
from ffcore.errors import ConfigError, ScriptError
from ffcore.execution import tracebacks
from ffcore.worker import grant_claim, handlers
from ffcore.worker.claiming import Claimer, Identity
from ffcore.worker.driver import CHAIN_LIMIT, WAKE_CLAIM, Driver
from ffcore.worker.handlers import Inline, Pool
from ffcore.worker.heartbeat import Heartbeat
from ffcore.worker.slots import Slots
from ffcore.worker.task import ClaimedTask, TaskConsumed

__all__ = ["CHAIN_LIMIT", "WAKE_CLAIM", "Registry", "Worker", "WorkerConfig", "handler", "registry"]

log = logging.getLogger("ffcore.worker")

Handler = Callable[[ClaimedTask], Any]

#: Why recording a task's outcome can fail: refused, already consumed, Valkey unreachable (logged; the lease
#: expires and the attempt is reclaimed if nothing was recorded).
_RECORDING_FAILED = (ScriptError, TaskConsumed, redis.ConnectionError, redis.TimeoutError)
#: A sync handler whose recent runs took less than this on average runs on the driver's thread: no thread hand-off
#: per task. Slower ones run on the pool, where several can wait on I/O at once.
INLINE_MAX_S = 0.001
#: A handler the driver runs itself that is still running after this long (s) makes a pool thread the driver (the
#: leases, hand-offs and claims go on); the deposed thread finishes the handler like a pool thread.
INLINE_WATCH_S = 0.01


class Registry:
    """Handlers by execution kind; `"*"` catches every kind without its own handler."""

    def __init__(self) -> None:
        self.handlers: dict[str, Handler] = {}
        #: Handler -> is it a coroutine function (asked once, not per task).
        self._is_async: dict[Handler, bool] = {}

    def handler(self, kind: str) -> Callable[[Handler], Handler]:
        def register(fn: Handler) -> Handler:
            self.handlers[kind] = fn
            return fn

        return register

    def is_async(self, fn: Handler) -> bool:
        known = self._is_async.get(fn)
        if known is None:
            known = self._is_async[fn] = inspect.iscoroutinefunction(fn)
        return known

    def get(self, kind: str) -> Handler | None:
        return self.handlers.get(kind) or self.handlers.get("*")


#: The default registry that `@handler` fills and `ffworker --module` serves.
registry = Registry()
handler = registry.handler


def default_instance_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def _caps_csv(caps: tuple[str, ...]) -> str:
    for c in caps:
        if not c or "," in c or any(ord(ch) <= 0x20 or ord(ch) == 0x7F for ch in c):
            raise ConfigError(f"capability {c!r} must be non-empty without commas, spaces or control characters")
    csv = ",".join(sorted(set(caps)))
    if len(caps) > 256 or len(csv.encode()) > 4096:
        raise ConfigError("too many capabilities (max 256 tokens, 4096 bytes)")
    return csv


@dataclass(frozen=True)
class WorkerConfig:
    lanes: tuple[str, ...] = ("default",)
    worker_id: str = "worker"
    worker_instance_id: str = field(default_factory=default_instance_id)
    capabilities: tuple[str, ...] = ()
    lease_ttl_ms: int = 30_000
    concurrency: int = 4
    #: Longest idle sleep between polls; polling backs off from 5 ms up to this.
    poll_interval_ms: int = 200
    #: The same while the driver listens on its wake channels: creates, promotions, resumptions, flow children
    #: and the index reconciler's finds then hand it work or wake it at once, and its polls only catch what a lost hint
    #: left (issue #21: a hundred listening workers polling every 200 ms cost the server and themselves about a
    #: claim probe per task at 500 tasks/s). Not below `poll_interval_ms`.
    listening_poll_interval_ms: int = 1_000
    reclaim_interval_ms: int = 1_000
    heartbeat_interval_ms: int = 2_000
    drain_timeout_s: float = 30.0
    #: Where claims come from: "" = this worker schedules itself; "valkey" or an http(s) URL = it only consumes
    #: grants the scheduler issued (admission applied there; ffcore.worker.grant_claim).
    scheduler: str = ""


class Worker:
    """Claims executions for its lanes and runs their handlers: `run()` drives it (ffcore.worker.driver) until
    `stop()` or SIGTERM/SIGINT, then drains. `claim_next`/`reclaim` + `execute` drive it by hand instead."""

    def __init__(self, backend: Backend, config: WorkerConfig | None = None, registry_: Registry | None = None) -> None:
        self.backend = backend
        self.config = cfg = config or WorkerConfig()
        if not cfg.lanes:
            raise ConfigError("a worker needs at least one lane")
        self.registry = registry_ or registry
        self.caps_csv = _caps_csv(cfg.capabilities)
        #: Every task this worker holds, however it was claimed (grant_claim takes and gives back slots too).
        self.slots = Slots(backend, max(1, cfg.concurrency))
        self.claimer = Claimer(backend, Identity(cfg.worker_id, cfg.worker_instance_id, cfg.lanes, self.caps_csv,
                                                 cfg.lease_ttl_ms, max(1, cfg.concurrency)),
                               on_task_done=self.slots.give_back)
        #: The scheduler this worker takes grants from (None: it schedules itself).
        self.grants = grant_claim.source_for(backend, cfg.scheduler)
        self.heartbeat = Heartbeat(backend, worker_id=cfg.worker_id, wiid=cfg.worker_instance_id, lanes=cfg.lanes,
                                   capabilities_csv=self.caps_csv, concurrency=max(1, cfg.concurrency),
                                   interval_ms=cfg.heartbeat_interval_ms, lease_ttl_ms=cfg.lease_ttl_ms)
        self.driver = Driver(self)
        #: One thread more than slots: the driver's, after a hand-over.
        self.pool = Pool(self.capacity + 1)
        self.inline = Inline(self.pool, INLINE_WATCH_S)
        #: Handler -> its recent run time (s, moving average): quick ones run on the driver's thread.
        self._took: dict[Handler | None, float] = {}
        #: Tasks a create handed to this worker directly (lua/fastpath.lua hand_off; for tests and benchmarks).
        self.handoffs = 0
        #: When claim_next last advertised this worker (monotonic s; run() registers it at start).
        self._advertised_at = float("-inf")
        #: What ended the driver for good (raised by run() after the drain).
        self._fatal: BaseException | None = None

    def handler(self, kind: str) -> Callable[[Handler], Handler]:
        return self.registry.handler(kind)

    @property
    def capacity(self) -> int:
        return max(1, self.config.concurrency)

    @property
    def in_flight(self) -> dict[str, ClaimedTask]:
        return self.slots.in_flight

    @property
    def completed(self) -> int:
        return self.slots.completed

    # ------------------------------------------------------------ claiming (also usable directly)
    def claim_next(self, n: int = 1) -> list[ClaimedTask]:
        """Claim up to `n` tasks now (fresh or resumed); the caller runs them. No waiting. A program that
        claims this way (no `run()`) is advertised as a live worker with its capabilities while it keeps
        claiming (at most once per heartbeat interval), so route-blocked work it can run is released."""
        now = time.monotonic()
        if now - self._advertised_at >= self.config.heartbeat_interval_ms / 1000:
            self._advertised_at = now
            self.heartbeat.advertise(sorted(self.in_flight))
        tasks = self.claimer.claim(n) if self.grants is None else grant_claim.claim_granted(self, n)
        return [t for t in tasks if self.slots.take(t)]

    def reclaim(self, n: int = 1) -> list[ClaimedTask]:
        return [t for t in self.claimer.reclaim(n) if self.slots.take(t)]

    # ------------------------------------------------------------ running handlers
    def execute(self, task: ClaimedTask) -> None:
        """Run the handler for `task` and record its outcome (returns once it is recorded)."""
        fn = self.registry.get(task.kind)
        if fn is not None and self.registry.is_async(fn):
            box: list[bytes | None] = []

            async def run() -> None:
                box.append(await self._arun(task, fn, report=False))

            handlers.run_async(run()).result()
            result = box[0]
        else:
            result = self._run(task, fn)
        if result is None:
            return
        try:
            task.complete(result)
        except _RECORDING_FAILED as e:
            log.warning("%s: recording the outcome failed: %s", task.execution_id, e)

    def start(self, task: ClaimedTask) -> None:
        """Hand a claimed task to its handler (the driver's call): async ones on the process's event loop, quick sync
        ones on the driver's own thread between its turns, slow ones (INLINE_MAX_S on average) on the pool. A success
        goes back to the driver, which records it."""
        fn = self.registry.get(task.kind)
        if fn is not None and self.registry.is_async(fn):
            handlers.run_async(self._arun(task, fn))
        elif self._took.get(fn, 0.0) < INLINE_MAX_S:
            self.inline.ready.append(lambda: self._report(task, self._run(task, fn)))
        else:
            self.pool.submit(functools.partial(self._run, task, fn), functools.partial(self._report, task))

    def _report(self, task: ClaimedTask, result: bytes | None) -> None:
        if result is not None:
            self.driver.finished(task, result)

    def _run(self, task: ClaimedTask, fn: Handler | None) -> bytes | None:
        if task.consumed:  # released by the drain while it waited for a thread
            return None
        started = time.perf_counter()
        try:
            result, error = (fn(task) if fn is not None else None), None
        except Exception as e:  # the handler failed: the attempt failed
            result, error = None, e
        self._took[fn] = 0.7 * self._took.get(fn, 0.0) + 0.3 * (time.perf_counter() - started)
        return self._outcome(task, fn, result, error, report=False)  # the caller reports it

    async def _arun(self, task: ClaimedTask, fn: Handler, report: bool = True) -> bytes | None:
        try:
            result, error = await fn(task), None
        except Exception as e:  # the handler failed: the attempt failed
            result, error = None, e
        # A failure is recorded here, on the loop: a round trip or two, rarer than successes (the driver's).
        return self._outcome(task, fn, result, error, report)

    def _outcome(self, task: ClaimedTask, fn: Handler | None, result: Any, error: BaseException | None,
                 report: bool) -> bytes | None:
        """What the handler's return or raise means: the encoded result when it succeeded and the attempt is still
        ours to complete (handed to the driver when `report`); None when the outcome was recorded here (a failure,
        no handler) or nothing is left to record (lease lost, consumed) — the task's slot is then given back."""
        out: bytes | None = None
        try:
            if fn is None:
                task.fail(f"no handler registered for kind {task.kind!r}", "no_handler")
                return None
            if error is None:
                try:
                    encoded = _encode_result(result)
                except Exception as e:  # a return value that cannot be stored fails the attempt
                    error = e
            if isinstance(error, TaskConsumed):
                raise error
            if error is not None:
                if task.consumed or task.lease_lost.is_set():
                    return None
                log.info("%s attempt %d failed: %s", task.execution_id, task.attempt_index, error)
                tracebacks.store(self.backend, task.execution_id, task.attempt_index, error)
                task.fail(f"{type(error).__name__}: {error}"[:1000], type(error).__name__)
                return None
            if not (task.consumed or task.lease_lost.is_set()):
                out = encoded
        except _RECORDING_FAILED as e:
            log.warning("%s: recording the outcome failed: %s", task.execution_id, e)
        finally:
            if out is None and not task.consumed:
                task.consumed = True
                self.slots.give_back(task)
        if out is not None and report:
            self.driver.finished(task, out)
        return out

    # ------------------------------------------------------------ the run loop
    def run(self, *, install_signal_handlers: bool = True) -> None:
        """Claim and run until stop() or SIGTERM/SIGINT; then drain (finish or release in-flight work)."""
        if install_signal_handlers and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, lambda *_: self.stop())
        self.heartbeat.register()
        self._advertised_at = float("inf")  # the driver beats on its own schedule
        self.slots.on_free = self.driver.freed
        try:
            self.driver.run()
        except Exception as e:
            log.error("worker %s stops: %s: %s", self.config.worker_instance_id, type(e).__name__, e)
            self._fatal = e
        finally:
            self.slots.on_free = lambda: None
            self._release_the_rest()
        if self._fatal is not None:
            raise self._fatal

    def stop(self) -> None:
        self.driver.stop()

    async def arun(self) -> None:
        """asyncio flavour: run the worker loop in a thread; cancel or call stop() to end it."""
        try:
            await asyncio.to_thread(self.run, install_signal_handlers=False)
        except asyncio.CancelledError:
            self.stop()
            raise

    def _release_the_rest(self) -> None:
        """After the drain window: hand what still runs back so another worker resumes it; leave the registry."""
        self.driver.stopping.set()
        for t in self.slots.tasks():
            try:
                t.mark_lost("worker_shutdown")
                t.release()
            except Exception as e:  # best effort; the lease will expire and be reclaimed otherwise
                log.warning("%s: release on shutdown failed: %s", t.execution_id, e)
        self.pool.close()  # each handler thread ends after its current task
        with contextlib.suppress(redis.ConnectionError, redis.TimeoutError):
            # Again, now that nothing is in flight: a completion sent while we still listened may have listed us.
            self.claimer.unlist()
            self.heartbeat.unregister()


def _encode_result(result: Any) -> bytes:
    if result is None:
        return b""
    if isinstance(result, bytes | bytearray | memoryview):
        return bytes(result)
    if isinstance(result, str):
        return result.encode()
    return json.dumps(result, separators=(",", ":")).encode()
