"""The driver: the one thread that does a worker's talking to Valkey (it runs inside `Worker.run`).

A task's way through a worker: a create hands it over on the worker's wake channel already claimed (or a hint
there makes the driver claim it: ffcore.worker.claiming); the driver takes a slot for it (ffcore.worker.slots)
and gives it to the handlers (ffcore.worker.handlers); the handler's result comes back to the driver's inbox,
and the driver's next turn writes ONE pipeline (`_write`): the completions of each (partition, lane) in one
`ff_complete_batch_and_claim` each — which also claims their successors, started at once — and the leases
due for renewal. Between turns the driver sleeps in one select() on its subscription and its inbox's pipe,
until the next timer: the poll claim, the next renewal, the heartbeat, the reclaim probe.

Fairness: a completion claims its successor on the same lane and partition at most CHAIN_LIMIT times in a
row; then the slot goes back to the driver's claim, which rotates over partitions and lanes (the claimer).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

import redis

from ffcore import events, keys, metrics, routing, subscriber, wake
from ffcore import functions as F
from ffcore.backoff import FATAL, Backoff
from ffcore.errors import ScriptError
from ffcore.ids import new_uuid_pairs
from ffcore.worker import slots
from ffcore.worker.handlers import Doorbell
from ffcore.worker.task import COMPLETED, SUCCESS, ClaimedTask

if TYPE_CHECKING:
    from ffcore.worker.worker import Worker

log = logging.getLogger("ffcore.worker")

#: Successors in a row a completion claims on its lane and partition before the claim rotation picks.
CHAIN_LIMIT = 32
#: Most tasks a claim on a wake hint asks for (a claim of all free slots first mints an id pair per slot).
WAKE_CLAIM = 4
#: Longest pause after a failed write or subscription: a due lease has 2/3 of its TTL left for more tries.
MAX_PAUSE_S = slots.MAX_PAUSE_S
#: What a turn returns on a thread that no longer drives.
HANDED_OVER = -1.0
#: How long the drain waits for its own end marker on the wake channel (hand-offs sent before it).
OWN_END_WAIT_S = 1.0


@dataclass
class _Done:
    """A handler's result, waiting for the driver to record it."""

    task: ClaimedTask
    result: bytes
    #: Whether its completion claims a successor (decided when queued).
    want: bool = False
    depth: int = 0


class Driver:
    def __init__(self, worker: Worker) -> None:
        self.w = worker
        self.backend, self.claimer, self.slots = worker.backend, worker.claimer, worker.slots
        cfg = worker.config
        #: Results from the handlers (deque appends and pops are atomic: no lock).
        self._inbox: deque[_Done] = deque()
        #: Completions queued for the next write (kept across a failed write).
        self._pending: list[_Done] = []
        self._freed = False
        #: How a handler's result, a freed slot or a stop wakes the driver while it runs.
        self._bell = Doorbell()
        self.stopping = threading.Event()
        self._sub: subscriber.Subscriber | None = None
        self._own = keys.worker_wake(cfg.worker_instance_id)
        self._lanes = {keys.lane_wake(lane): lane for lane in cfg.lanes}
        self._sub_at, self._sub_backoff = 0.0, Backoff(max_s=MAX_PAUSE_S)
        self._own_end, self._own_end_by = False, float("inf")
        self._depth: dict[str, int] = {}
        #: The next poll claim's size: WAKE_CLAIM after a claim that took all there was, doubling while claims
        #: come back full (each claimed slot costs an id pair: a worker fed one task at a time asks for few).
        self._claim_size = WAKE_CLAIM
        #: Whether work may wait that this worker has not looked at (a claim came back full, or a hint found no
        #: free slot): only then does a successor-less completion make it claim at once.
        self._backlog = False
        self._hinted, self._claim_at, self._idle_s, self._claim_backoff = False, 0.0, 0.005, Backoff()
        self._write_at, self._write_backoff = 0.0, Backoff(max_s=MAX_PAUSE_S)
        self._beat_at, self._reclaim_at = 0.0, 0.0
        self._drain_until: float | None = None
        #: Set once the drive is over (drained, or ended by an error: `_fatal`), whichever thread drove last.
        self._over = threading.Event()
        self._fatal: BaseException | None = None
        #: Batch completion calls made, the completions they carried, loop turns (tests, benchmarks).
        self.calls = self.completions = self.turns = 0

    # ------------------------------------------------------------ what other threads call
    def finished(self, task: ClaimedTask, result: bytes) -> None:
        """A handler succeeded: its result is recorded by the driver's next write."""
        self._inbox.append(_Done(task, result))
        self.poke()

    def freed(self) -> None:
        """A slot was given back (Slots.on_free)."""
        self._freed = True
        self.poke()

    def poke(self) -> None:
        self._bell.ring()

    # ------------------------------------------------------------ the loop
    def run(self) -> None:
        """Drive on a pool thread (another after each hand-over: ffcore.worker.handlers.Inline) until stopped and
        drained. This thread only waits, never runs a handler: it returns when the drive ends, even if one hangs."""
        cfg = self.w.config
        self._beat_at = time.monotonic() + cfg.heartbeat_interval_ms / 1000
        self._reclaim_at, self._drain_until, self._fatal = 0.0, None, None
        self._over.clear()
        self._bell.open()
        try:
            self.w.inline.start(self._lead)
            while not self._over.wait(0.5):
                pass
        finally:
            if not self._over.is_set():  # interrupted: end the drive before closing what it uses
                self.stop()
                self._over.wait(cfg.drain_timeout_s + 5)
            self.w.inline.close()
            self._close_sub()
            self._bell.close()
        if self._fatal is not None:
            raise self._fatal

    def _lead(self) -> None:
        """Turns on this thread until the drive is over, or until the driver was handed to another thread."""
        try:
            while (until := self._turn()) is not None:
                if until == HANDED_OVER:
                    return
                self._sleep(until)
        except BaseException as e:  # noqa: BLE001 - raised by run(), on the thread that called it
            self._fatal = e
        self._over.set()

    def _turn(self) -> float | None:
        """One turn: read, run what the driver runs itself, write, claim. When to wake up next, None once drained,
        HANDED_OVER when another thread drives now."""
        self.turns += 1
        cfg = self.w.config
        now = time.monotonic()
        if self.stopping.is_set() and self._drain_until is None:
            self._drain_until = self._begin_drain(now)
        self._listen(now)
        # Before the write: a hand-off starts without waiting for it, and its completion goes out in it.
        if not self.w.inline.run_ready():
            return HANDED_OVER
        self._take_results(self._drain_until is not None)
        self._commit(now)
        if self._drain_until is not None:
            return None if self._drained(now, self._drain_until) else now + 0.05
        try:
            self._claim(now)
            if self.slots.free() > 0 and now >= self._reclaim_at:
                self._reclaim_at = now + cfg.reclaim_interval_ms / 1000
                for t in self.w.reclaim(self.slots.free()):
                    self.w.start(t)
            if now >= self._beat_at:
                self._beat_at = now + cfg.heartbeat_interval_ms / 1000
                self.w.heartbeat.beat(sorted(self.slots.in_flight))
        except FATAL:
            raise
        except Exception as e:  # noqa: BLE001 - one bad reply must not take the worker down
            # In-flight tasks keep running and their leases keep being renewed meanwhile.
            pause = self._claim_backoff.failed(f"worker {cfg.worker_instance_id} claim loop", e, log)
            self._claim_at = time.monotonic() + pause
        return min(self._beat_at, self._reclaim_at)

    def _drained(self, now: float, until: float) -> bool:
        """Whether the drain is over: nothing in flight and every hand-off read, or its time is up."""
        read = self._own_end or now >= self._own_end_by
        return (read and not (self.slots.in_flight or self._pending or self._inbox)) or now >= until

    def _sleep(self, until: float) -> None:
        if self.slots.free() > 0 and not self.stopping.is_set():
            until = min(until, self._claim_at)
        if self._pending:
            until = min(until, self._write_at)
        if self._sub is None:
            until = min(until, self._sub_at)
        until = min(until, self.slots.next_due())
        fileno = getattr(self._sub, "fileno", None)
        fd = fileno() if fileno is not None else None
        if fd is None and self._sub is not None:
            until = min(until, time.monotonic() + 0.05)  # a subscription without a socket of its own: polled
        self._bell.sleep(until, fd, lambda: bool(self._inbox or self._freed or self.w.inline.ready))

    def stop(self) -> None:
        self.stopping.set()
        self._bell.ring(always=True)

    # ------------------------------------------------------------ the wake channel
    def _listen(self, now: float) -> None:
        """Subscribe when due (the worker takes hand-offs once live), then read what arrived."""
        if self._sub is None:
            if now < self._sub_at or (self.stopping.is_set() and self._own_end):
                return
            try:
                self._sub = subscriber.subscribe(self.backend.client, [self._own, *self._lanes])
            except Exception as e:  # noqa: BLE001 - hints only: polling goes on while it subscribes again (FATAL raises)
                self._lost_sub(e)
                return
            self._sub_backoff.reset()
            if not self.stopping.is_set():
                # From the next claim on, claims that leave a slot free list this worker on the idle sets; the
                # claims made before listed nobody: the next one does (relist).
                self.claimer.listening = True
                self.claimer.relist = True
                self._claim_at = 0.0
        try:
            batch = self._sub.read(0.0)
        except Exception as e:  # noqa: BLE001 - as above
            self._lost_sub(e)
            return
        if batch:
            self._on_wake(batch)

    def _lost_sub(self, e: BaseException) -> None:
        self.claimer.listening = False
        self._close_sub()
        self._sub_at = time.monotonic() + self._sub_backoff.failed(
            f"worker {self.w.config.worker_instance_id} wake listener", e, log)
        subscriber.refresh_slots(self.backend.client)  # a failover: the next subscription asks the promoted node

    def _close_sub(self) -> None:
        if self._sub is not None:
            sub, self._sub = self._sub, None
            sub.close()

    def _on_wake(self, batch: list[tuple[str, bytes]]) -> None:
        """Hand-offs start at once; hints that queued up are answered by ONE claim (not one each)."""
        for ch, data in batch:
            if ch == self._own and isinstance(data, bytes) and data.startswith(F.HANDOFF):
                self._take_handoff(data)
            elif ch == self._own and data == wake.OWN_END:
                self._own_end = True  # the drain's marker: nothing handed to us follows
            elif ch == self._own:
                for own_lane, parts in wake.parse_own(data).items():
                    self.claimer.hint(own_lane, parts)
                    self._hinted = True
            elif (lane := self._lanes.get(ch)) is not None:
                parts, needs = wake.parse_hint(data)
                if needs and not self.claimer.can_run(needs):
                    continue  # work for other workers (issue #21, S4)
                self.claimer.hint(lane, parts)
                self._hinted = True
        if self._hinted:
            self._claim_at = 0.0

    def _take_handoff(self, data: bytes) -> None:
        """A create claimed a task for us (lua/fastpath.lua hand_off): it runs as a claimed one would — also
        while draining (the drain runs or releases it)."""
        try:
            lane, partition, claimed = F.parse_handoff(data)
        except ValueError:
            log.warning("a malformed hand-off was ignored (its lease expires and it is reclaimed)")
            return
        self.claimer.hint(lane, [partition])
        if not self.slots.take(task := self.claimer.task_from(claimed, lane)):
            log.warning("%s: a hand-off of a claim already held was ignored", claimed.execution_id)
            return
        self.w.handoffs += 1
        events.publish(self.backend, ids=[claimed.execution_id])  # live pages: waiting -> active
        self.w.start(task)

    # ------------------------------------------------------------ claims
    def _claim(self, now: float) -> None:
        free = self.slots.free()
        if free <= 0:
            if self._hinted:
                self._backlog = True  # announced work found no slot: a freed slot looks
                metrics.inc(metrics.WORKER_AT_CAPACITY)
                self._hinted = False
            return
        if now < self._claim_at:
            return
        hinted, self._hinted = self._hinted, False
        want = min(free, WAKE_CLAIM if hinted else self._claim_size)
        tasks = self.w.claim_next(want)
        self._claim_backoff.reset()
        for t in tasks:
            self.w.start(t)
        full = len(tasks) >= want
        self._backlog = full
        cfg = self.w.config
        poll_s = max(cfg.poll_interval_ms, cfg.listening_poll_interval_ms if self.claimer.listening else 0) / 1000
        if full:
            self._claim_size = min(max(self._claim_size, want) * 2, self.slots.capacity)
            self._claim_at = now if self.slots.free() > 0 else now + poll_s
            return
        if not hinted:
            self._claim_size = WAKE_CLAIM
        # Empty-handed polls back off from 5 ms to the poll interval; a full worker still looks that often.
        self._idle_s = 0.005 if tasks else min(self._idle_s * 2, poll_s)
        self._claim_at = now + (self._idle_s if self.slots.free() > 0 else poll_s)

    # ------------------------------------------------------------ results and the write
    def _take_results(self, draining: bool) -> None:
        if self._freed:
            # A slot freed with no successor claim listing us: the next claim lists us idle again, now.
            self._freed = False
            self.claimer.relist = True
            self._claim_at = 0.0
        while self._inbox:
            d = self._inbox.popleft()
            d.depth = self._depth.pop(d.task.execution_id, 0)
            d.want = d.depth < CHAIN_LIMIT - 1 and not draining and self.w.grants is None  # grants: no self-claims
            try:
                d.task.begin_terminal()
            except Exception as e:  # noqa: BLE001 - the handler itself ended the attempt meanwhile
                log.warning("%s: recording the outcome failed: %s", d.task.execution_id, e)
                continue
            self._pending.append(d)

    def _commit(self, now: float) -> None:
        """One write: the pending completions (one batch call per partition, lane and successor capability list)
        and the leases due for renewal."""
        if now < self._write_at:
            return
        due = self.slots.due(now)
        if not self._pending and not due:
            return
        groups: dict[tuple[int, str, str], list[_Done]] = {}
        for d in self._pending:
            caps = routing.required_csv_of(d.task.policy) if d.task.policy else ""
            groups.setdefault((d.task.execution_id.partition_index, d.task.lane, caps), []).append(d)
        batches = [(g, ds[i:i + F.MAX_BATCH]) for g, ds in groups.items() for i in range(0, len(ds), F.MAX_BATCH)]
        idn = self.claimer.ident
        calls = [F.complete_batch_and_claim(
            [(d.task.keys, d.task.fence, d.result) for d in ds], worker_id=idn.worker_id,
            capabilities_csv=idn.capabilities_csv, lease_ttl_ms=idn.lease_ttl_ms,
            ids=new_uuid_pairs(sum(d.want for d in ds)), caps_csv=g[2], wants=[d.want for d in ds],
            idle=self.claimer.idle_slots(*g)) for g, ds in batches]
        calls += self.slots.renewals(due)
        sent = time.monotonic()
        try:
            replies = self._write(calls)
        except FATAL:
            raise
        except Exception as e:  # noqa: BLE001 - retried (and the leases renewed) next turn
            self._write_failed(e, batches, due)
            return
        self._write_backoff.reset()
        self._pending = []
        for (g, ds), reply in zip(batches, replies, strict=False):
            self._completed(g[1], ds, reply, time.monotonic() - sent)
        self.slots.renewed(due, replies[len(batches):])

    def _write(self, calls: list[F.Call]) -> list[F.Reply | ScriptError]:
        """Every write of a turn goes out here, as one pipeline (the place to wait for replication, too); it
        returns before any task it claimed is started."""
        return self.backend.call_many(calls)

    def _write_failed(self, e: Exception, batches: list[tuple[tuple[int, str, str], list[_Done]]],
                      due: list[ClaimedTask]) -> None:
        """No answer: each call ran entirely or not at all, so sending them again is safe — a completion already
        applied comes back execution_not_active and is reconciled against its attempt record."""
        what = [f"completion of {len(ds)} tasks on partition {g[0]} lane {g[1]}" for g, ds in batches]
        if due:
            what.append(f"lease renewal of {len(due)} tasks")
        pause = self._write_backoff.failed(" and ".join(what), e, log)
        self._write_at = time.monotonic() + pause
        self.slots.renewal_failed(due)
        now_ms = time.time() * 1000
        keep = []
        for d in self._pending:
            if now_ms + pause * 1000 < d.task.lease_expires_at:
                keep.append(d)
                continue
            # Past its lease the completion would be refused anyway: given up.
            log.warning("%s: recording the outcome failed (%s: %s); giving up: its lease expires first",
                        d.task.execution_id, type(e).__name__, e)
            self._settle(d, e, None)
        self._pending = keep

    def _completed(self, lane: str, ds: list[_Done], reply: F.Reply | ScriptError, took: float) -> None:
        started: list[str] = []
        outcomes: list[ScriptError | None]
        claimed: list[F.Claimed] = []
        if isinstance(reply, ScriptError):
            outcomes = [reply] * len(ds)
        else:
            got: F.Claims = reply.raw[0]
            if got.outcomes is None or len(got.outcomes) != len(ds):
                bad = ScriptError("unexpected_reply", [f"{len(got.outcomes or [])} outcomes for {len(ds)} tasks"],
                                  "ff_complete_batch_and_claim")
                outcomes = [bad] * len(ds)
            else:
                outcomes, claimed = list(got.outcomes), list(got.claimed)
                self.calls += 1
                self.completions += len(ds)
        ok = sum(1 for o in outcomes if o is None)
        if ok:
            metrics.inc(metrics.ATTEMPT_OUTCOME, lane, "ok", n=ok)
        # A refused completion claimed nothing: successors go to the wanting entries that completed.
        nexts = iter(claimed)
        for d, err in zip(ds, outcomes, strict=True):
            nxt = None
            if d.want and err is None and (c := next(nexts, None)) is not None:
                nxt = self.claimer.task_from(c, lane)
                metrics.observe(metrics.CLAIM_SECONDS, took, lane)
                started.append(nxt.execution_id)
            self._settle(d, err, nxt)
        events.publish(self.backend, ids=[*(d.task.execution_id for d in ds), *started])

    def _settle(self, d: _Done, err: BaseException | None, nxt: ClaimedTask | None) -> None:
        """A completion's outcome: the task's own bookkeeping, its slot to the successor (or free)."""
        task = d.task
        try:
            if isinstance(err, ScriptError):
                task.refused(err, COMPLETED, SUCCESS)  # returns when our own retry had applied it
                err = None
            if err is None:
                task.release_admission()
        except Exception as e:  # noqa: BLE001 - refused for good: the attempt is no longer ours
            log.warning("%s: recording the outcome failed: %s", task.execution_id, e)
        task.on_done = None  # the slot is settled here, not by the task's give_back
        task.end_terminal(announce=False)  # the batch is announced as a whole
        self.slots.drop(task)
        if nxt is not None:
            self._depth[nxt.execution_id] = d.depth + 1
            if self.slots.take(nxt):
                self.w.start(nxt)
        elif not d.want:
            self._freed = True  # chain limit or drain: the rotation claims (and lists us idle)
        elif self._backlog:
            self._claim_at = 0.0  # a slot is free and work may wait elsewhere

    # ------------------------------------------------------------ drain
    def _begin_drain(self, now: float) -> float:
        """Off the idle sets (creates hand over to the other workers from now on), then our end marker: once it is
        read, every hand-off sent before it has been (it runs, or is released at the end)."""
        self.claimer.listening = False
        self._own_end_by = now + OWN_END_WAIT_S
        with contextlib.suppress(redis.ConnectionError, redis.TimeoutError):
            self.claimer.unlist()
            if self._sub is None or not self.backend.client.publish(self._own, wake.OWN_END):
                self._own_end = True
        return now + self.w.config.drain_timeout_s
