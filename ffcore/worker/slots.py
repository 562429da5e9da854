"""A worker's handler slots: the tasks it holds, when each lease is next renewed, and who frees a slot.

Every way a task is claimed (the driver's claims, a create's hand-off, `claim_next`/`reclaim` called directly,
a scheduler's grant: ffcore.worker.grant_claim) `take`s a slot; a task whose attempt a handler ended itself (or
that was dropped) `give_back`s it, which pokes the driver (a slot is free: it may claim). Completions the driver
records itself `drop` the task without the poke: their successor, claimed in the same call, took the slot.
Shared by the driver and the handler threads, hence the lock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from ffcore import functions as F
from ffcore import metrics
from ffcore.backend import Backend
from ffcore.errors import ScriptError
from ffcore.execution import journal
from ffcore.worker.task import LEASE_GONE, ClaimedTask

#: Longest pause before a failed renewal is tried again (several tries fit in the 2/3 TTL a due lease has left).
MAX_PAUSE_S = 1.0


def renew_after_s(task: ClaimedTask) -> float:
    """A lease is renewed every third of its TTL: two tries more fit before it would expire."""
    return task.lease_ttl_ms / 3000


class Slots:
    def __init__(self, backend: Backend, capacity: int) -> None:
        self.backend = backend
        self.capacity = max(1, capacity)
        self.in_flight: dict[str, ClaimedTask] = {}
        #: eid -> (task, when its lease is next renewed, monotonic s). A task whose completion is still being
        #: recorded stays here: its lease must last until the completion is in.
        self._leases: dict[str, tuple[ClaimedTask, float]] = {}
        self._lock = threading.Lock()
        #: Tasks whose slot was given back (counted once each).
        self.completed = 0
        #: Called after a give_back (the driver's wake-up; nothing while no driver runs).
        self.on_free: Callable[[], None] = lambda: None

    def free(self) -> int:
        return self.capacity - len(self.in_flight)

    def take(self, task: ClaimedTask) -> bool:
        """Hold `task`; False (nothing changes) when this very claim is held already: a repeated hand-off must
        not run its handler twice."""
        with self._lock:
            cur = self.in_flight.get(task.execution_id)
            if cur is not None and (cur.lease_id, cur.lease_epoch) == (task.lease_id, task.lease_epoch):
                return False
            self.in_flight[task.execution_id] = task
            self._leases[task.execution_id] = (task, time.monotonic() + renew_after_s(task))
        return True

    def give_back(self, task: ClaimedTask) -> None:
        """The task's on_done: its attempt ended outside the driver's completions; the driver may claim."""
        if self.drop(task):
            self.on_free()

    def drop(self, task: ClaimedTask) -> bool:
        """Forget `task` (its lease no longer renewed); whether it held a slot."""
        with self._lock:
            cur = self._leases.get(task.execution_id)
            if cur is not None and cur[0] is task:
                del self._leases[task.execution_id]
            if self.in_flight.get(task.execution_id) is not task:
                return False
            del self.in_flight[task.execution_id]
            self.completed += 1
            return True

    def due(self, now: float) -> list[ClaimedTask]:
        """Tasks whose lease is due for renewal at `now`."""
        with self._lock:
            return [t for t, at in self._leases.values() if at <= now]

    def next_due(self) -> float:
        with self._lock:
            return min((at for _, at in self._leases.values()), default=float("inf"))

    def renew_at(self, task: ClaimedTask, at: float) -> None:
        with self._lock:
            cur = self._leases.get(task.execution_id)
            if cur is not None and cur[0] is task:
                self._leases[task.execution_id] = (task, at)

    def stop_renewing(self, task: ClaimedTask) -> None:
        """The lease is gone: no more renewals (the handler still holds its slot until it returns)."""
        with self._lock:
            cur = self._leases.get(task.execution_id)
            if cur is not None and cur[0] is task:
                del self._leases[task.execution_id]

    def tasks(self) -> list[ClaimedTask]:
        with self._lock:
            return list(self.in_flight.values())

    # ------------------------------------------------------------ lease renewal (calls made by the driver's write)
    def renewals(self, due: list[ClaimedTask]) -> list[F.Call]:
        grace = self.backend.settings.lease_history_grace_ms
        return [F.renew_lease(t.keys, t.fence, lease_ttl_ms=t.lease_ttl_ms, history_grace_ms=grace) for t in due]

    def renewed(self, tasks: list[ClaimedTask], replies: list[F.Reply | ScriptError]) -> None:
        """The renewals' replies: a lease gone is lost (unless our own terminal call ended it); another refusal is
        tried again soon; a renewal is due again a third of the TTL later."""
        now = time.monotonic()
        done: list[tuple[str, int, int]] = []
        failed = sum(1 for r in replies if isinstance(r, ScriptError))
        metrics.inc(metrics.LEASE_RENEWAL, "ok", n=len(tasks) - failed)
        metrics.inc(metrics.LEASE_RENEWAL, "error", n=failed)
        for t, r in zip(tasks, replies, strict=True):
            if isinstance(r, ScriptError):
                if r.code in LEASE_GONE:
                    if not t.consumed:
                        t.mark_lost(r.code)
                    self.stop_renewing(t)
                else:
                    t.renewal_failures += 1
                    self.renew_at(t, now + min(MAX_PAUSE_S, renew_after_s(t) / 4))
                continue
            t.lease_expires_at = int(r[0])
            t.renewal_failures = 0
            done.append((t.execution_id, t.attempt_index, t.lease_expires_at - t.lease_ttl_ms))
            self.renew_at(t, now + renew_after_s(t))
        journal.tally_renewals(self.backend, done)  # the History folds them

    def renewal_failed(self, tasks: list[ClaimedTask]) -> None:
        """The write carrying these renewals got no answer: a lease past its expiry is lost."""
        metrics.inc(metrics.LEASE_RENEWAL, "error", n=len(tasks))
        now_ms = time.time() * 1000
        for t in tasks:
            t.renewal_failures += 1
            if now_ms >= t.lease_expires_at:
                t.mark_lost("lease_expired")
                self.stop_renewing(t)
