"""Group commit of a worker's completions.

Handler threads that finish at about the same time on one lane and partition complete their tasks
together: one `ff_complete_batch_and_claim` call completes all of them (each exactly as its own
ff_complete_execution) and claims their successors. The first thread to arrive leads: it takes
everything queued for that lane and partition, makes the call and hands each waiting thread its
outcome and successor; whoever queued meanwhile waits for the next leader, which is the oldest of
them (leadership is handed over, never held by one thread for long). Under light load a batch is one
task and nothing waits; under load the round trips, reply parsing and the server's per-call work are
shared by the whole batch, and no artificial delay is ever added. `complete_later` queues without
waiting (the worker's run loop): the leader settles such entries itself and keeps leading while only
they are queued, so under load one handler thread does the committing and the others never block.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ffcore import events, metrics
from ffcore import functions as F
from ffcore.backend import Backend
from ffcore.backoff import FATAL, Backoff
from ffcore.errors import ScriptError
from ffcore.ids import new_uuid_pairs
from ffcore.worker.task import COMPLETED, SUCCESS, TRANSPORT, ClaimedTask

if TYPE_CHECKING:
    from ffcore.worker.claiming import Identity

log = logging.getLogger("ffcore.worker.commit")


#: (partition, lane, capability csv of the successors): completions that may share a call.
Group = tuple[int, str, str]


#: After an asynchronous completion: (task, its successor or None, the error or None).
Then = Callable[[ClaimedTask, ClaimedTask | None, BaseException | None], None]


class _Entry:
    __slots__ = ("task", "result", "want_next", "then", "_gate", "ready", "lead", "next", "error")

    def __init__(self, task: ClaimedTask, result: bytes, want_next: bool, then: Then | None = None) -> None:
        self.task, self.result, self.want_next, self.then = task, result, want_next, then
        # A held lock as a one-shot gate: far cheaper than threading.Event (a Condition in Python)
        # for the one hand-over per task this is.
        self._gate = threading.Lock()
        self._gate.acquire()
        self.ready = False
        self.lead = False
        self.next: ClaimedTask | None = None
        self.error: BaseException | None = None

    def wait(self) -> None:
        self._gate.acquire()

    def open(self) -> None:
        if not self.ready:
            self.ready = True
            self._gate.release()


class GroupCommit:
    def __init__(self, backend: Backend, ident: Identity,
                 task_from: Callable[[F.Claimed, str], ClaimedTask],
                 idle_slots: Callable[[int, str, str], int] = lambda n, lane, caps: 0) -> None:
        self.backend, self.ident, self.task_from = backend, ident, task_from
        #: The `idle` a successor claim passes for its group (Claimer.idle_slots: 0 unless the worker listens).
        self.idle_slots = idle_slots
        self._lock = threading.Lock()
        self._queues: dict[Group, list[_Entry]] = {}
        self._leading: set[Group] = set()
        #: Calls made and completions they carried (for tests and benchmarks).
        self.calls = 0
        self.completions = 0

    def complete(self, task: ClaimedTask, result: bytes, *, want_next: bool, caps_csv: str = "") -> ClaimedTask | None:
        """Complete `task` (as task.complete() would: same errors, same reconciliation of a lost reply);
        returns its successor on the same lane and partition when `want_next` and one was claimed.
        The successor is leased to this worker instance; the caller tracks and runs it."""
        task.begin_terminal()
        entry = _Entry(task, result, want_next)
        group = (task.execution_id.partition_index, task.lane, caps_csv)
        try:
            with self._lock:
                self._queues.setdefault(group, []).append(entry)
                lead = group not in self._leading
                if lead:
                    self._leading.add(group)
            if not lead:
                entry.wait()
            if lead or entry.lead:
                self._lead(group)
            if entry.error is not None:
                if not isinstance(entry.error, ScriptError):
                    raise entry.error
                task.refused(entry.error, COMPLETED, SUCCESS)  # returns when our own retry had applied it
                task.release_admission()
                return None
            task.release_admission()
            return entry.next
        finally:
            task.end_terminal(announce=False)  # the leader announced the batch

    def complete_later(self, task: ClaimedTask, result: bytes, *, want_next: bool, caps_csv: str = "",
                       then: Then) -> None:
        """complete() without waiting for the call: `then(task, successor, error)` runs once the batch is
        back, on whichever thread commits it (this one, before returning, when it leads). The task's own
        bookkeeping (quota slot, owner's on_done) is done before `then`. TaskConsumed raises at once."""
        task.begin_terminal()
        entry = _Entry(task, result, want_next, then)
        group = (task.execution_id.partition_index, task.lane, caps_csv)
        with self._lock:
            self._queues.setdefault(group, []).append(entry)
            lead = group not in self._leading
            if lead:
                self._leading.add(group)
        if lead:
            self._lead(group)

    def _lead(self, group: Group) -> None:
        """Commit what is queued for `group` (this thread's entry is its head) until the head is a waiting
        caller, who takes over; asynchronous entries are settled here. Leadership is never lost: the
        group leaves `_leading` only with an empty queue, under the lock."""
        while True:
            with self._lock:
                queue = self._queues[group]
                batch, queue[:] = queue[:F.MAX_BATCH], queue[F.MAX_BATCH:]
            try:
                self._commit(group, batch)
            except Exception as e:  # noqa: BLE001 - every waiting task must learn that its completion failed
                for entry in batch:
                    entry.error, entry.next = e, None
            finally:
                with self._lock:
                    for done in batch:
                        if done.then is None:
                            done.open()
            for done in batch:
                if done.then is not None:
                    self._settle(done)
            with self._lock:
                queue = self._queues[group]
                if not queue:
                    self._leading.discard(group)
                    del self._queues[group]
                    return
                if queue[0].then is None:
                    queue[0].lead = True
                    queue[0].open()
                    return

    @staticmethod
    def _settle(entry: _Entry) -> None:
        """An asynchronous entry's bookkeeping (what complete() does on the caller's thread), then its callback."""
        task, err = entry.task, entry.error
        try:
            if isinstance(err, ScriptError):
                task.refused(err, COMPLETED, SUCCESS)  # returns when our own retry had applied it
                err = None
            if err is None:
                task.release_admission()
        except Exception as e:  # noqa: BLE001 - handed to the callback, never raised on the leader's thread
            err = e
        finally:
            task.end_terminal(announce=False)  # the leader announced the batch
        if entry.then is not None:
            entry.then(task, entry.next if err is None else None, err)

    def _commit(self, group: Group, batch: list[_Entry]) -> None:
        wanting = [e for e in batch if e.want_next]
        started: list[str] = []
        try:
            sent = time.monotonic()
            got = self._send(group, batch, len(wanting))
            if got is None:
                return
            self.calls += 1
            self.completions += len(batch)
            for entry, outcome in zip(batch, got.outcomes or [], strict=True):
                entry.error = outcome
            lane = group[1]
            ok = sum(1 for e in batch if e.error is None)
            if ok:
                metrics.inc(metrics.ATTEMPT_OUTCOME, lane, "ok", n=ok)
            took = time.monotonic() - sent  # successors are claimed by the completion call itself
            for _ in got.claimed:
                metrics.observe(metrics.CLAIM_SECONDS, took, lane)
            # A refused completion claimed nothing: successors go to the wanting entries that completed.
            for entry, claimed in zip([e for e in wanting if e.error is None], got.claimed, strict=False):
                entry.next = self.task_from(claimed, lane)
            started = [c.execution_id for c in got.claimed]
        finally:
            # One hint for live pages: what ended (or tried to) and what started.
            events.publish(self.backend, ids=[*(e.task.execution_id for e in batch), *started])

    def _send(self, group: Group, batch: list[_Entry], want: int) -> F.Claims | None:
        """The batch call; None (every entry holding the error) when it failed as a whole.

        A call that failed without an answer (Valkey unreachable, an unexpected error) is retried with
        backoff while the leases last (the renewer keeps them meanwhile). One call is atomic: it ran
        entirely or not at all, so retrying is safe either way: a completion that had been applied comes
        back execution_not_active, which each task reconciles against its attempt record. (Successors
        claimed by a lost reply wait for their lease to expire and are reclaimed.)"""
        backoff = Backoff()
        while True:
            try:
                reply = self.backend.call(self._call(group, batch, want))
                break
            except ScriptError as e:
                for entry in batch:
                    entry.error = e
                return None
            except FATAL:
                raise
            except Exception as e:  # noqa: BLE001 - retried below, or handed to every entry
                # The earliest lease decides: past it, the completion would be refused anyway.
                left_s = (min(en.task.lease_expires_at for en in batch) - time.time() * 1000) / 1000
                pause = backoff.next_pause()
                if pause >= left_s:
                    log.warning("completion of %d tasks on partition %d lane %s failed (%s: %s); giving up: "
                                "their leases expire first", len(batch), group[0], group[1], type(e).__name__, e)
                    for entry in batch:
                        entry.error = e
                    return None
                log.warning("completion of %d tasks on partition %d lane %s failed (%s: %s); retrying in %.1f s",
                            len(batch), group[0], group[1], type(e).__name__, e, pause,
                            exc_info=backoff.failures == 1 and not isinstance(e, TRANSPORT))
                time.sleep(pause)
        got: F.Claims = reply.raw[0]
        if got.outcomes is None or len(got.outcomes) != len(batch):
            raise ScriptError("unexpected_reply", [f"{len(got.outcomes or [])} outcomes for {len(batch)} tasks"],
                              "ff_complete_batch_and_claim")
        return got

    def _call(self, group: Group, batch: list[_Entry], want: int) -> F.Call:
        idn = self.ident
        return F.complete_batch_and_claim(
            [(e.task.keys, e.task.fence, e.result) for e in batch], worker_id=idn.worker_id,
            capabilities_csv=idn.capabilities_csv, lease_ttl_ms=idn.lease_ttl_ms,
            ids=new_uuid_pairs(want), caps_csv=group[2], wants=[e.want_next for e in batch],
            idle=self.idle_slots(*group))
