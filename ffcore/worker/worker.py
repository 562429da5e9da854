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

from ffcore import events, keys, metrics, wake
from ffcore import functions as F
from ffcore.backend import Backend
from ffcore.backoff import FATAL, Backoff
from ffcore.errors import ConfigError, ScriptError
from ffcore.worker import grant_claim, routing, tracebacks, wake_hub
from ffcore.worker.claiming import Claimer, Identity
from ffcore.worker.commit import GroupCommit
from ffcore.worker.heartbeat import Heartbeat
from ffcore.worker.ready import ReadyQueue
from ffcore.worker.renewal import Renewer
from ffcore.worker.task import ClaimedTask, TaskConsumed

log = logging.getLogger("ffcore.worker")

Handler = Callable[[ClaimedTask], Any]

#: Tasks one handler thread runs back to back (each completion claiming the next, ffcore.worker.commit) before
#: it hands the choice back to the claim loop (which rotates over partitions and lanes, so none is starved).
CHAIN_LIMIT = 32

#: Most tasks a wake hint's claim takes (on the listener thread); a claim that fills it wakes the claim loop.
WAKE_CLAIM = 4

#: Why recording a task's outcome can fail: refused, already consumed, Valkey unreachable (logged; the lease
#: expires and the attempt is reclaimed if nothing was recorded).
_RECORDING_FAILED = (ScriptError, TaskConsumed, redis.ConnectionError, redis.TimeoutError)


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
    #: The same while the worker listens on the wake hub: creates, promotions, resumptions, flow children and the
    #: index reconciler's finds then hand it work or wake it at once, and its polls only catch what a lost hint
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
    def __init__(self, backend: Backend, config: WorkerConfig | None = None, registry_: Registry | None = None) -> None:
        self.backend = backend
        self.config = cfg = config or WorkerConfig()
        if not cfg.lanes:
            raise ConfigError("a worker needs at least one lane")
        self.registry = registry_ or registry
        self.caps_csv = _caps_csv(cfg.capabilities)
        self.claimer = Claimer(backend, Identity(cfg.worker_id, cfg.worker_instance_id, cfg.lanes, self.caps_csv,
                                                 cfg.lease_ttl_ms, max(1, cfg.concurrency)), on_task_done=self._done)
        self.renewer = Renewer(backend, on_fatal=self._fail)
        #: The scheduler this worker takes grants from (None: it schedules itself).
        self.grants = grant_claim.source_for(backend, cfg.scheduler)
        #: Completions of tasks finishing together on a lane and partition share one call.
        self.commits = GroupCommit(backend, self.claimer.ident, self.claimer.task_from,
                                   idle_slots=self.claimer.idle_slots)
        self.heartbeat = Heartbeat(backend, worker_id=cfg.worker_id, wiid=cfg.worker_instance_id, lanes=cfg.lanes,
                                   capabilities_csv=self.caps_csv, concurrency=max(1, cfg.concurrency),
                                   interval_ms=cfg.heartbeat_interval_ms, lease_ttl_ms=cfg.lease_ttl_ms)
        self.in_flight: dict[str, ClaimedTask] = {}
        #: Slots held by threads whose completion is claiming their next task (not in in_flight meanwhile).
        self._reserved = 0
        self._local = threading.local()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        #: One claimer at a time: the claim loop or the wake listener (see _claim_now).
        self._claim_lock = threading.Lock()
        #: Claimed tasks waiting for a handler thread (the run loop's; None tells a thread to end).
        self._ready: ReadyQueue[ClaimedTask | None] = ReadyQueue()
        self._handlers: list[threading.Thread] = []
        #: Successors in a row per queued successor (CHAIN_LIMIT).
        self._depth: dict[str, int] = {}
        self._stop = threading.Event()
        #: Set once the drain took this worker off the idle sets and every hand-off sent before has been read:
        #: it leaves the wake hub then (not at the stop: a task handed to us meanwhile is ours to run).
        self._listen_done = threading.Event()
        #: Our part of the process's wake hub while run() runs.
        self._listener: wake_hub.Listener | None = None
        #: Tasks a create handed to this worker directly (lua/fastpath.lua hand_off; for tests and benchmarks).
        self.handoffs = 0
        #: What ended a background loop for good (raised by run() after the drain).
        self._fatal: BaseException | None = None
        #: The claim loop's next claim size: WAKE_CLAIM after a claim that took all there was, doubling (up to
        #: the capacity) while claims come back full — each claimed slot costs a minted id pair and two
        #: arguments, so a worker fed one task at a time must not ask for 64.
        self._claim_size = WAKE_CLAIM
        #: Whether work may be waiting that this worker has not looked at: the last claim came back full, or
        #: announced work found no free slot. Only then does a freed slot wake the claim loop; otherwise the
        #: completion's own successor claim has just looked (issue #21: one claim per task, not two).
        self._backlog = False
        #: When claim_next last advertised this worker (monotonic s; run() registers it at start).
        self._advertised_at = float("-inf")
        self.completed = 0

    def handler(self, kind: str) -> Callable[[Handler], Handler]:
        return self.registry.handler(kind)

    @property
    def capacity(self) -> int:
        return max(1, self.config.concurrency)

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
        for t in tasks:
            self._track(t)
        return tasks

    def reclaim(self, n: int = 1) -> list[ClaimedTask]:
        tasks = self.claimer.reclaim(n)
        for t in tasks:
            self._track(t)
        return tasks

    def _track(self, t: ClaimedTask) -> None:
        with self._lock:
            self.in_flight[t.execution_id] = t
        self.renewer.add(t)

    def _done(self, t: ClaimedTask) -> None:
        self.renewer.remove(t)
        with self._lock:
            if self.in_flight.get(t.execution_id) is t:
                del self.in_flight[t.execution_id]
                self.completed += 1
        if not getattr(self._local, "chaining", False):
            self.claimer.relist = True  # a slot freed and no successor claim listed us: the claim loop does
            self._wake.set()

    def _done_chaining(self, t: ClaimedTask) -> None:
        """_done for a task whose completion also claims its successor: the successor (or, failing that,
        the wake in _complete_later's callback) takes over the slot, so the claim loop is not woken."""
        self._local.chaining = True
        try:
            self._done(t)
        finally:
            self._local.chaining = False

    # ------------------------------------------------------------ running handlers
    def execute(self, task: ClaimedTask) -> None:
        """Run the handler for `task` and record its outcome (returns once it is recorded)."""
        self._execute_one(task, chain=False)

    def _run_handler(self, task: ClaimedTask) -> bytes | None:
        """Run `task`'s handler: its encoded result when it succeeded and the attempt is still ours to
        complete; None when the outcome was recorded here (a failure, no handler) or nothing is left to
        record (lease lost, already consumed) — the task is then consumed and its slot given back."""
        out: bytes | None = None
        try:
            fn = self.registry.get(task.kind)
            if fn is None:
                task.fail(f"no handler registered for kind {task.kind!r}", "no_handler")
                return None
            try:
                result = asyncio.run(fn(task)) if self.registry.is_async(fn) else fn(task)
                encoded = _encode_result(result)
            except TaskConsumed:
                raise
            except Exception as e:  # the handler failed (or returned what cannot be stored): the attempt failed
                if task.consumed or task.lease_lost.is_set():
                    return None
                log.info("%s attempt %d failed: %s", task.execution_id, task.attempt_index, e)
                tracebacks.store(self.backend, task.execution_id, task.attempt_index, e)
                task.fail(f"{type(e).__name__}: {e}"[:1000], type(e).__name__)
                return None
            if not (task.consumed or task.lease_lost.is_set()):
                out = encoded
        except _RECORDING_FAILED as e:
            log.warning("%s: recording the outcome failed: %s", task.execution_id, e)
        finally:
            if out is None and not task.consumed:
                task.consumed = True
                self._done(task)
        return out

    def _execute_one(self, task: ClaimedTask, *, chain: bool) -> ClaimedTask | None:
        """Run `task` and wait for its completion; with `chain`, its successor claimed in the same call."""
        result = self._run_handler(task)
        if result is None:
            return None
        try:
            return self._complete_and_claim(task, result, chain)
        except _RECORDING_FAILED as e:
            log.warning("%s: recording the outcome failed: %s", task.execution_id, e)
        finally:
            if not task.consumed:
                task.consumed = True
                self._done(task)
        return None

    def _complete_and_claim(self, task: ClaimedTask, result: bytes, want_next: bool) -> ClaimedTask | None:
        """Complete `task` (with the others finishing now on its lane and partition: GroupCommit) and,
        when `want_next`, claim the next one of its lane and partition in the same call."""
        # More of the same kind of work: from the index of its capabilities.
        caps = routing.required_csv_of(task.policy) if task.policy else ""
        if want_next:
            with self._lock:
                self._reserved += 1
        self._local.chaining = want_next
        nxt: ClaimedTask | None = None
        try:
            nxt = self.commits.complete(task, result, want_next=want_next, caps_csv=caps)
            if nxt is not None:
                self._track(nxt)  # (the group commit announced it)
        finally:
            self._local.chaining = False
            if want_next:
                with self._lock:
                    self._reserved -= 1
                if nxt is None and self._backlog:
                    self._wake.set()  # a slot is free and work may wait elsewhere: the claim loop looks
        return nxt

    def _handle(self) -> None:
        """A handler thread of the run loop: runs ready tasks and hands each success to the group commit
        without waiting for the call — the successor it claims joins the ready queue."""
        while True:
            task = self._ready.get()
            if task is None:
                return
            if task.consumed:  # handed back at shutdown while it waited
                continue
            try:
                result = self._run_handler(task)
                if result is not None:
                    self._complete_later(task, result)
            except Exception:  # a bug must not cost the worker a handler thread
                log.exception("%s: handler thread error", task.execution_id)

    def _complete_later(self, task: ClaimedTask, result: bytes) -> None:
        depth = self._depth.pop(task.execution_id, 0)
        # A successor of the same lane and partition, up to CHAIN_LIMIT in a row (then the claim loop picks).
        want = depth < CHAIN_LIMIT - 1 and not self._stop.is_set() and self.grants is None  # grants: no self-claims
        if want:
            with self._lock:
                self._reserved += 1
            task.on_done = self._done_chaining

        def then(t: ClaimedTask, nxt: ClaimedTask | None, err: BaseException | None) -> None:
            if err is not None:
                log.warning("%s: recording the outcome failed: %s", t.execution_id, err)
            if not want:
                return
            if nxt is not None:
                self._depth[nxt.execution_id] = depth + 1
                self._track(nxt)
                self._ready.put(nxt)
            with self._lock:
                self._reserved -= 1
            if nxt is None and self._backlog:
                self._wake.set()  # a slot is free and work may wait elsewhere: the claim loop looks

        caps = routing.required_csv_of(task.policy) if task.policy else ""
        try:
            self.commits.complete_later(task, result, want_next=want, caps_csv=caps, then=then)
        except TaskConsumed as e:  # the handler itself ended the attempt
            log.warning("%s: recording the outcome failed: %s", task.execution_id, e)
            if want:
                with self._lock:
                    self._reserved -= 1

    def run(self, *, install_signal_handlers: bool = True) -> None:
        """Claim and run until stop() or SIGTERM/SIGINT; then drain (finish or release in-flight work)."""
        if install_signal_handlers and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, lambda *_: self.stop())
        self.heartbeat.register()
        self._advertised_at = float("inf")  # the loop beats on its own schedule
        self.renewer.start()
        self._listen()
        self._handlers = [threading.Thread(target=self._handle, name=f"ff-task-{i}", daemon=True)
                          for i in range(self.capacity)]
        for h in self._handlers:
            h.start()
        idle_s, last_reclaim, last_beat = 0.005, 0.0, time.monotonic()
        backoff = Backoff()
        try:
            while not self._stop.is_set():
                # Cleared before looking, not after: a wake arriving while we claim must not be lost.
                self._wake.clear()
                tasks: list[ClaimedTask] = []
                try:
                    with self._claim_lock:
                        tasks = self._claim_into()
                        free = self.capacity - len(self.in_flight) - self._reserved
                        now = time.monotonic()
                        if free > 0 and now - last_reclaim >= self.config.reclaim_interval_ms / 1000:
                            last_reclaim = now
                            more = self.reclaim(free)
                            for t in more:
                                self._ready.put(t)
                            tasks += more
                    if time.monotonic() - last_beat >= self.config.heartbeat_interval_ms / 1000:
                        last_beat = time.monotonic()
                        self.heartbeat.beat(sorted(self.in_flight))
                except Exception as e:  # noqa: BLE001 - one bad reply must not take the worker down
                    # In-flight tasks keep running and their leases keep being renewed meanwhile.
                    self._stop.wait(backoff.failed(f"worker {self.config.worker_instance_id} claim loop", e, log))
                    continue
                backoff.reset()
                if tasks and len(self.in_flight) < self.capacity:
                    idle_s = 0.005
                    continue
                # Full, it still looks every poll interval: work that came without a hint (another client's) is
                # found that soon after a slot frees, since polls made while full no longer mark a backlog.
                cfg = self.config
                listening_ms = cfg.listening_poll_interval_ms if self.claimer.listening else 0
                poll_s = max(cfg.poll_interval_ms, listening_ms) / 1000
                self._wake.wait(idle_s if len(self.in_flight) < self.capacity else poll_s)
                idle_s = min(idle_s * 2, poll_s) if not tasks else 0.005
        finally:
            self._drain()
            self._stop.set()
            self._listen_done.set()
            self._unlisten()
        if self._fatal is not None:
            raise self._fatal

    def _listen(self) -> None:
        """Join this process's wake hub (ffcore.worker.wake_hub) for our own channel and our lanes': a create then
        hands us work or wakes us at once (a hint: polling stays)."""
        own = keys.worker_wake(self.config.worker_instance_id)
        lanes = {keys.lane_wake(lane): lane for lane in self.config.lanes}
        self._listener = wake_hub.Listener(self.config.worker_instance_id, frozenset([own, *lanes]),
                                           lambda batch, shared: self._on_wake(batch, shared, own, lanes),
                                           self._on_listening,
                                           self._fail)
        wake_hub.hub(self.backend.url).join(self._listener)

    def _unlisten(self) -> None:
        if self._listener is not None:
            wake_hub.hub(self.backend.url).leave(self._listener)
            self._listener = None

    def _on_listening(self, live: bool) -> None:
        """Our channels are subscribed (or the hub lost its connection: polling only until it subscribes again)."""
        if live and self._stop.is_set():
            return  # stopping: off the idle sets for good (the drain unlisted us)
        # From the next claim on, claims that leave a slot free list this worker as idle, and a create wakes it
        # alone on its own channel (lua/fastpath.lua wake_one); the lane channels stay for the rest.
        self.claimer.listening = live
        if live:
            self.claimer.relist = True  # claims made before this listed nobody: the claim loop lists us now
            self._wake.set()

    def _on_wake(self, batch: list[tuple[str, bytes]], shared: bool, own: str, channels: dict[str, str]) -> None:
        """The messages of one read on our channels (on the hub's thread). Hints that queued up meanwhile (one per
        create: a busy listener falls behind) are taken together and answered by ONE claim, not one claim each
        that finds the work taken by the first (issue #21: empty claims). When other workers of this process got
        them too (`shared`), the claim loop claims: on the hub's thread their claims would go one after another."""
        hinted = handed = others = False
        for ch, data in batch:
            if ch == own and isinstance(data, bytes) and data.startswith(F.HANDOFF):
                self._take_handoff(data)
                handed = True
            elif ch == own and data == wake.OWN_END:
                self._listen_done.set()  # the drain's marker: nothing handed to us follows
            elif ch == own:
                for lane, parts in wake.parse_own(data).items():
                    self.claimer.hint(lane, parts)
                    hinted = True
            elif (named := channels.get(ch)) is not None:
                parts, needs = wake.parse_hint(data)
                if needs and not self.claimer.can_run(needs):
                    others = True  # work for other workers (issue #21, S4: 99 of 100 claimed)
                    continue
                self.claimer.hint(named, parts)
                hinted = True
        # Claimed here (or handed to us), the claim loop is not woken as well: its own (empty-handed) claim would
        # compete with the handler just starting.
        if hinted:
            if shared or not self._claim_now():
                self._backlog = True  # the loop looks; were it full, a freed slot looks
                self._wake.set()
        elif not (handed or others):
            self._wake.set()

    def _take_handoff(self, data: bytes) -> None:
        """A create handed us a task (lua/fastpath.lua hand_off): leased to us already, it joins the ready
        queue as a claimed one would — also while draining (the drain runs or releases it)."""
        try:
            lane, partition, claimed = F.parse_handoff(data)
        except ValueError:
            log.warning("a malformed hand-off was ignored (its lease expires and it is reclaimed)")
            return
        self.claimer.hint(lane, [partition])
        task = self.claimer.task_from(claimed, lane)
        self._track(task)
        self.handoffs += 1
        events.publish(self.backend, ids=[claimed.execution_id])  # live pages: waiting -> active
        self._ready.put(task)

    def _claim_into(self, limit: int | None = None) -> list[ClaimedTask]:
        """Claim up to the free slots (at most `limit`) and queue them for the handler threads; the caller
        holds `_claim_lock`."""
        if self._stop.is_set():
            return []
        free = self.capacity - len(self.in_flight) - self._reserved
        if free <= 0:
            # Announced work (a hint's claim, `limit`) found no slot: a freed slot looks again. So does any claim
            # of a worker that gets no hints. The loop's own poll of a listening worker learns nothing here —
            # taken as evidence, it woke the loop after every completion (issue #21, S4: ≈ 30 % of the CPU of
            # 100 single-slot workers).
            if limit is not None or not self.claimer.listening:
                self._backlog = True
            if limit is not None:
                metrics.inc(metrics.WORKER_AT_CAPACITY)  # work was offered to a full worker
            return []
        want = min(free, self._claim_size if limit is None else limit)
        tasks = self.claim_next(want)
        full = len(tasks) >= want
        self._backlog = full
        if full:  # more may wait: the loop's next claim asks for twice as many
            self._claim_size = min(max(self._claim_size, want) * 2, self.capacity)
        elif limit is None:  # the loop took all there was
            self._claim_size = WAKE_CLAIM
        for t in tasks:
            self._ready.put(t)
        return tasks

    def _claim_now(self) -> bool:
        """On a wake hint, claim from the listener thread itself: no hand-off to the claim loop (which
        may be mid-poll). False when the claim loop must look instead: it is claiming right now, this
        claim failed, or it took a whole wake claim (more may wait). (Claiming fewer took all there was;
        with no slot left, a finishing task wakes the loop.)"""
        if not self._handlers or not self._claim_lock.acquire(blocking=False):
            return False
        try:
            # A hint usually announces a few tasks: a small claim starts them sooner (a claim of all free
            # slots first mints an id pair per slot). A full small claim leaves the rest to the loop.
            return len(self._claim_into(WAKE_CLAIM)) < WAKE_CLAIM
        except FATAL:
            raise
        except Exception as e:  # noqa: BLE001 - the claim loop retries (and logs, should it fail too)
            log.info("claim on wake failed (%s: %s); the claim loop retries", type(e).__name__, e)
            return False
        finally:
            self._claim_lock.release()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def _fail(self, e: BaseException) -> None:
        """A background loop met what no retry can fix: stop, and have run() raise it once drained."""
        log.error("worker %s stops: %s: %s", self.config.worker_instance_id, type(e).__name__, e)
        self._fatal = e
        self.stop()

    async def arun(self) -> None:
        """asyncio flavour: run the worker loop in a thread; cancel or call stop() to end it."""
        try:
            await asyncio.to_thread(self.run, install_signal_handlers=False)
        except asyncio.CancelledError:
            self.stop()
            raise

    def _drain(self) -> None:
        self._stop.set()
        with self._claim_lock:  # a wake-time claim in progress lands in the pool; later ones see the stop
            pass
        with contextlib.suppress(redis.ConnectionError, redis.TimeoutError):
            self.claimer.unlist()  # creates wake (and hand off to) the other workers from now on
            # A hand-off published before that may still be on its way: our channel delivers in order, so once
            # the listener reads this marker it has read them all (they run or are released below).
            if self.backend.client.publish(keys.worker_wake(self.config.worker_instance_id), wake.OWN_END):
                self._listen_done.wait(1.0)
        deadline = time.monotonic() + self.config.drain_timeout_s
        while self.in_flight and time.monotonic() < deadline:
            self._wake.clear()
            self._wake.wait(0.05)
        for t in list(self.in_flight.values()):
            # Still running after the drain window: hand the attempt back so another worker resumes it.
            try:
                t.mark_lost("worker_shutdown")
                t.release()
            except Exception as e:  # best effort; the lease will expire and be reclaimed otherwise
                log.warning("%s: release on shutdown failed: %s", t.execution_id, e)
        for _ in self._handlers:
            self._ready.put(None)  # each handler thread ends after its current task
        self.renewer.stop()
        with contextlib.suppress(redis.ConnectionError, redis.TimeoutError):
            # Again, now that nothing is in flight: a commit sent before the first unlist (a completion that
            # claims next, made while we still listened) may have listed us idle after it.
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
