"""Background lease renewal for every in-flight task of a worker (one thread, pipelined renewals).

Each task renews every TTL/3. A fencing error marks the task's lease lost; any other failure (Valkey
unreachable, an unexpected reply) is logged and retried after a short pause (ffcore.backoff, capped at
MAX_PAUSE_S: a due lease has 2/3 of its TTL left), and a lease that reaches its expiry without a
successful renewal is lost. Only what cannot heal (a configuration or library error) ends the thread,
through `on_fatal`.
The thread sleeps until the earliest renewal is due (never shorter than a tick; with nothing to renew,
a second) and is woken early only for a task due sooner than that — not for every task a worker picks
up, whose thread wake-up would compete with the handler starting.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from ffcore import functions as F
from ffcore import metrics
from ffcore.backend import Backend
from ffcore.backoff import FATAL, Backoff
from ffcore.errors import ScriptError
from ffcore.execution import journal
from ffcore.worker.task import LEASE_GONE, ClaimedTask

log = logging.getLogger("ffcore.worker.renewal")


#: How long an idle renewer sleeps between looks (a task due sooner wakes it).
IDLE_S = 1.0
#: Longest pause after failed renewals: several tries must fit in the 2/3 TTL a due lease has left.
MAX_PAUSE_S = 1.0


class Renewer:
    def __init__(self, backend: Backend, tick_s: float = 0.1,
                 on_fatal: Callable[[BaseException], None] | None = None) -> None:
        self.backend = backend
        self.tick_s = tick_s
        self.on_fatal = on_fatal
        self.backoff = Backoff(max_s=MAX_PAUSE_S)
        self._tasks: dict[str, tuple[ClaimedTask, float]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        #: Set when a task is added that is due before the thread's current wake-up (or on stop).
        self._kick = threading.Event()
        self._wake_at = float("inf")
        #: Loop passes made (tests: an idle renewer makes one a second).
        self.passes = 0
        self._thread = threading.Thread(target=self._loop, name="ff-renewer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._kick.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def add(self, task: ClaimedTask) -> None:
        at = time.monotonic() + task.lease_ttl_ms / 3000
        with self._lock:
            self._tasks[task.execution_id] = (task, at)
            early = at < self._wake_at
        if early:
            self._kick.set()

    def remove(self, task: ClaimedTask) -> None:
        with self._lock:
            cur = self._tasks.get(task.execution_id)
            if cur is not None and cur[0] is task:
                del self._tasks[task.execution_id]

    def tasks(self) -> list[ClaimedTask]:
        with self._lock:
            return [t for t, _ in self._tasks.values()]

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.passes += 1
            now = time.monotonic()
            # Consumed tasks too: a completion being retried (ffcore.worker.commit) still needs its lease.
            with self._lock:
                due = [t for t, at in self._tasks.values() if at <= now]
            pause = 0.0
            if due:
                try:
                    self.renew(due)
                    self.backoff.reset()
                except FATAL as e:
                    if self.on_fatal is not None:
                        self.on_fatal(e)
                    return
                except Exception as e:  # noqa: BLE001 - the thread that keeps every lease must not die
                    pause = self.backoff.failed(f"lease renewal of {len(due)} tasks", e, log)
            with self._lock:
                # Cleared under the lock: an add() after this sees the new _wake_at and kicks if earlier.
                self._kick.clear()
                now = time.monotonic()
                nxt = min((at for _, at in self._tasks.values()), default=now + IDLE_S)
                self._wake_at = max(nxt, now + self.tick_s, now + pause)
            self._kick.wait(self._wake_at - now)

    def renew(self, tasks: list[ClaimedTask]) -> None:
        """Renew `tasks` in one round trip. A call that failed as a whole is raised, after losing the
        leases it let reach their expiry."""
        calls = [F.renew_lease(t.keys, t.fence, lease_ttl_ms=t.lease_ttl_ms,
                               history_grace_ms=self.backend.settings.lease_history_grace_ms) for t in tasks]
        try:
            replies = self.backend.call_many(calls)
        except Exception:
            metrics.inc(metrics.LEASE_RENEWAL, "error", n=len(tasks))
            for t in tasks:
                t.renewal_failures += 1
                if self.backend_now_ms_safe() >= t.lease_expires_at:
                    t.mark_lost("lease_expired")
                    self.remove(t)
            raise
        now = time.monotonic()
        renewed: list[tuple[str, int, int]] = []
        failed = sum(1 for r in replies if isinstance(r, ScriptError))
        metrics.inc(metrics.LEASE_RENEWAL, "ok", n=len(tasks) - failed)
        metrics.inc(metrics.LEASE_RENEWAL, "error", n=failed)
        for t, r in zip(tasks, replies, strict=True):
            if isinstance(r, ScriptError):
                if r.code in LEASE_GONE:
                    if not t.consumed:  # (a consumed task's own terminal call ended it: nothing was lost)
                        t.mark_lost(r.code)
                    self.remove(t)
                elif not t.consumed:
                    t.renewal_failures += 1
                continue
            t.lease_expires_at = int(r[0])
            t.renewal_failures = 0
            renewed.append((t.execution_id, t.attempt_index, t.lease_expires_at - t.lease_ttl_ms))
            with self._lock:
                if t.execution_id in self._tasks and self._tasks[t.execution_id][0] is t:
                    self._tasks[t.execution_id] = (t, now + t.lease_ttl_ms / 3000)
        journal.tally_renewals(self.backend, renewed)  # the History folds them

    def backend_now_ms_safe(self) -> int:
        return int(time.time() * 1000)
