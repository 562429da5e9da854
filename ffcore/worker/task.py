"""A claimed task: the lease holder's view of one execution attempt.

Terminal operations (complete, fail, cancel, delay, move_to_waiting_children) consume the task. A
terminal call whose reply was lost (connection dropped after sending) reconciles against the stored
attempt record instead of failing: if our attempt already ended the way we asked, the call succeeded.
`lease_lost` is set as soon as any call or the renewer learns that the lease is gone; handlers can
check `task.lease_lost.is_set()` or wait on it.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import threading
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

from ffcore import events, metrics
from ffcore import functions as F
from ffcore.backend import Backend
from ffcore.errors import ScriptError
from ffcore.execution import journal
from ffcore.functions import Fence
from ffcore.ids import ExecutionId
from ffcore.keys import ExecKeys
from ffcore.policy import retry_json_for_failure, suspend_defaults
from ffcore.reads import decode_map, text
from ffcore.worker.task_ops import LEASE_GONE, TRANSPORT, LeaseLost, StreamOps, TaskConsumed, UsageOps
from ffcore.worker.task_suspend import SuspendOps, SuspendOutcome

__all__ = ["LEASE_GONE", "TRANSPORT", "ClaimedTask", "LeaseLost", "TaskConsumed"]

log = logging.getLogger("ffcore.worker.task")

#: What a completion leaves behind: the attempt's state, the execution's terminal outcome.
COMPLETED = frozenset({"ended_success"})
SUCCESS = ("success",)


@dataclass(frozen=True)
class FailOutcome:
    retry_scheduled: bool
    delay_until: int | None = None


@dataclass
class ClaimedTask(SuspendOps, UsageOps, StreamOps):
    backend: Backend
    execution_id: ExecutionId
    lane: str
    kind: str
    payload: bytes
    tags: dict[str, str]
    policy: dict[str, Any]
    attempt_index: int
    attempt_id: str
    attempt_type: str
    lease_id: str
    lease_epoch: int
    lease_expires_at: int
    lease_ttl_ms: int
    worker_instance_id: str
    lease_lost: threading.Event = field(default_factory=threading.Event)
    lost_reason: str = ""
    consumed: bool = False
    renewal_failures: int = 0
    on_done: Callable[[ClaimedTask], None] | None = field(default=None, repr=False)

    @functools.cached_property
    def keys(self) -> ExecKeys:
        return ExecKeys(self.execution_id)

    @property
    def fence(self) -> Fence:
        return Fence(self.lease_id, self.lease_epoch, self.attempt_id, self.attempt_index,
                     self.worker_instance_id, self.lane)

    def json(self) -> Any:
        """The input payload decoded as JSON."""
        return json.loads(self.payload or b"null")

    # ------------------------------------------------------------ lease state
    def mark_lost(self, reason: str) -> None:
        if not self.lease_lost.is_set():
            self.lost_reason = reason
            self.lease_lost.set()
            log.warning("lease lost on %s attempt %d: %s", self.execution_id, self.attempt_index, reason)

    @property
    def is_lease_healthy(self) -> bool:
        return not self.lease_lost.is_set() and not self.consumed

    def _check(self, reply_error: ScriptError) -> None:
        if reply_error.code in LEASE_GONE:
            self.mark_lost(reply_error.code)

    # ------------------------------------------------------------ non-terminal
    def renew(self) -> int:
        """Extend the lease by its TTL; returns the new expiry (ms)."""
        try:
            reply = self.backend.call(F.renew_lease(self.keys, self.fence, lease_ttl_ms=self.lease_ttl_ms,
                                                    history_grace_ms=self.backend.settings.lease_history_grace_ms))
        except ScriptError as e:
            metrics.inc(metrics.LEASE_RENEWAL, "error")
            self._check(e)
            raise
        self.lease_expires_at = int(reply[0])
        self.renewal_failures = 0
        journal.tally_renewals(self.backend, [(self.execution_id, self.attempt_index,
                                               self.lease_expires_at - self.lease_ttl_ms)])
        metrics.inc(metrics.LEASE_RENEWAL, "ok")
        return self.lease_expires_at

    def update_progress(self, pct: int | float | str = "", message: str = "") -> None:
        if pct != "" and not 0 <= float(pct) <= 100:
            raise ValueError("progress pct must be within 0..100")
        try:
            self.backend.call(F.update_progress(self.keys, self.fence, pct=str(pct), message=message))
        except ScriptError as e:
            self._check(e)
            raise
        journal.note(self.backend, self.execution_id, "progress", attempt=self.attempt_index, pct=str(pct),
                     message=message, actor=self.worker_instance_id)

    # ------------------------------------------------------------ terminal
    def complete(self, result: bytes | str = b"") -> None:
        data = result.encode() if isinstance(result, str) else result
        self._terminal(F.complete_execution(self.keys, self.fence, data), COMPLETED, SUCCESS)
        metrics.inc(metrics.ATTEMPT_OUTCOME, self.lane, "ok")

    def fail(self, reason: str, category: str = "") -> FailOutcome:
        """Fail the attempt; the stored policy's retry_policy decides retry or terminal failure (a category
        outside a non-empty `retryable_categories` is not retried; exponential `jitter` draws the delay)."""
        retry_json = retry_json_for_failure(
            self.policy, category, lambda: int(text(self.backend.client.hget(self.keys.core, "retry_count")) or 0))
        reply = self._terminal(F.fail_execution(self.keys, self.fence, reason=reason, category=category,
                                                retry_policy_json=retry_json), {"ended_failure"},
                               ("failed", "none"))
        if reply is None:  # reconciled: read what happened
            core = decode_map(self.backend.client.hgetall(self.keys.core))
            if core.get("lifecycle_phase") == "runnable":
                out = FailOutcome(True, int(core.get("delay_until") or 0) or None)
            else:
                out = FailOutcome(False)
        elif reply[0] == "retry_scheduled":
            # The contract keeps no record of the backoff once the retry is claimed: the History's does.
            journal.note(self.backend, self.execution_id, "backoff", attempt=self.attempt_index, until=int(reply[1]),
                         actor=self.worker_instance_id)
            out = FailOutcome(True, int(reply[1]))
        else:
            out = FailOutcome(False)
        # The board's outcomes: a scheduled retry, else a timeout (by category) or an error.
        kind = "retry" if out.retry_scheduled else ("timeout" if category.lower() == "timeout" else "error")
        metrics.inc(metrics.ATTEMPT_OUTCOME, self.lane, kind)
        return out

    def suspend(self, *args: Any, **kw: Any) -> SuspendOutcome:
        """`SuspendOps.suspend`, with the execution policy's `suspension_policy` giving the timeout and the
        timeout behaviour the call leaves out."""
        return super().suspend(*args, **suspend_defaults(self.policy, args, kw))

    def cancel(self, reason: str) -> None:
        refs = F.CoreRefs(self.lane, self.attempt_index, self.worker_instance_id,
                          text(self.backend.client.hget(self.keys.core, "current_waitpoint_id")))
        self._terminal(F.cancel_execution(self.keys, refs, reason=reason, source="worker", lease_id=self.lease_id,
                                          lease_epoch=str(self.lease_epoch)), {"ended_cancelled"}, ("cancelled",))
        metrics.inc(metrics.ATTEMPT_OUTCOME, self.lane, "cancelled")

    def delay(self, delay_until_ms: int) -> None:
        """Release the lease; the same attempt continues after `delay_until_ms` (resumed claim)."""
        self._terminal(F.delay_execution(self.keys, self.fence, delay_until=delay_until_ms), {"suspended"},
                       ("none",))

    def move_to_waiting_children(self) -> None:
        self._terminal(F.move_to_waiting_children(self.keys, self.fence), {"suspended"}, ("none",))

    def release(self) -> None:
        """Hand the attempt back for another worker to resume now (graceful shutdown)."""
        self.delay(self.backend.now_ms())

    def _terminal(self, call: F.Call, applied_states: AbstractSet[str], outcomes: tuple[str, ...]) -> F.Reply | None:
        # `outcomes`: the terminal_outcome values an already-applied call leaves behind ("none" when it
        # leaves the execution runnable: a scheduled retry, a delay, waiting for children).
        self.begin_terminal()
        try:
            reply = self._terminal_call(call, applied_states, outcomes)
            self._release_admission()  # the attempt ended: give back its quota concurrency slot
            return reply
        finally:
            self.end_terminal()

    def begin_terminal(self) -> None:
        """Consume the task for a terminal call (a second one raises TaskConsumed)."""
        if self.consumed:
            raise TaskConsumed(f"{self.execution_id}: a terminal operation was already called")
        self.consumed = True

    def release_admission(self) -> None:
        """After a successful terminal call made elsewhere (the driver's batch completion): give back the quota slot."""
        self._release_admission()

    def end_terminal(self, *, announce: bool = True) -> None:
        """After the terminal call, whatever it answered: the live-page hint (unless the caller announces
        a whole batch itself) and the owner's bookkeeping."""
        if announce:
            events.publish(self.backend, ids=[self.execution_id])  # a hint for live pages (buffered)
        if self.on_done is not None:
            self.on_done(self)

    def _terminal_call(self, call: F.Call, applied_states: AbstractSet[str],
                       outcomes: tuple[str, ...]) -> F.Reply | None:
        try:
            return self.backend.call(call)
        except TRANSPORT as e:
            # The call may or may not have been applied: ask the attempt record.
            if self._applied(applied_states):
                log.info("%s: %s reply lost but the call was applied", self.execution_id, call.function)
                return None
            log.warning("%s: %s reply lost (%s); retrying once", self.execution_id, call.function, e)
            return self.backend.call(call)
        except ScriptError as e:
            self.refused(e, applied_states, outcomes)
            return None

    def refused(self, e: ScriptError, applied_states: AbstractSet[str], outcomes: tuple[str, ...]) -> None:
        """A terminal call's error reply: returns when our own earlier call (e.g. a retry after a lost
        reply) had already applied it; otherwise notes a lost lease and raises the error."""
        if (e.code == "execution_not_active" and len(e.details) >= 2
                and e.details[0] in outcomes and e.details[1] == str(self.lease_epoch)
                and self._applied(applied_states)):
            return
        self._check(e)
        raise e

    def _applied(self, states: AbstractSet[str]) -> bool:
        pipe = self.backend.client.pipeline(transaction=False)
        pipe.hmget(self.keys.attempt(self.attempt_index), ["attempt_state", "lease_epoch"])
        pipe.hget(self.keys.core, "current_lease_epoch")
        (state, epoch), _ = pipe.execute()
        return text(state) in states and text(epoch) == str(self.lease_epoch)

    # ------------------------------------------------------------ asyncio flavour
    async def acomplete(self, result: bytes | str = b"") -> None:
        await asyncio.to_thread(self.complete, result)

    async def afail(self, reason: str, category: str = "") -> FailOutcome:
        return await asyncio.to_thread(self.fail, reason, category)

    async def aupdate_progress(self, pct: int | float | str = "", message: str = "") -> None:
        await asyncio.to_thread(self.update_progress, pct, message)

    async def wait_lease_lost(self, poll_s: float = 0.1) -> str:
        while not self.lease_lost.is_set():
            await asyncio.sleep(poll_s)
        return self.lost_reason
