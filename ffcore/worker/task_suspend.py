"""Claimed-task operations: suspend, pending waitpoints and resume signals (mixed into ClaimedTask).

    @handler("approve")
    def approve(task):
        if task.attempt_type == "resumed":
            sigs = task.resume_signals()          # the signals that satisfied the condition
            return {"approved_by": sigs[0].source_identity}
        out = task.suspend("approved", timeout_ms=3_600_000, timeout_behavior="fail")
        publish(task.execution_id, out.waitpoint_id, out.token)   # hand the token to the signaller

`suspend()` releases the lease (the task is consumed) unless a pending waitpoint's buffered signals
already satisfy the condition: then it returns `already_satisfied=True` and the task keeps its lease.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ffcore import events
from ffcore import functions as F
from ffcore.errors import ScriptError
from ffcore.ids import ExecutionId, new_uuid
from ffcore.keys import ExecKeys, PartitionKeys
from ffcore.reads import decode_map, text
from ffcore.suspension.signals import PendingWaitpoint, matcher_names
from ffcore.worker.task_errors import LEASE_GONE, TRANSPORT, TaskConsumed

if TYPE_CHECKING:
    from ffcore.backend import Backend
    from ffcore.worker.task import ClaimedTask

log = logging.getLogger("ffcore.worker.task")

TIMEOUT_BEHAVIORS = frozenset({"fail", "cancel", "expire", "auto_resume", "auto_resume_with_timeout_signal",
                               "escalate"})
#: Stored with the suspension, not interpreted by the engine (contract §7.4).
RESUME_POLICY = {"resume_target": "runnable", "close_waitpoint_on_resume": True, "consume_matched_signals": True,
                 "retain_signal_buffer_until_closed": True}


@dataclass(frozen=True)
class ResumeSignal:
    signal_id: str
    signal_name: str
    signal_category: str
    source_type: str
    source_identity: str
    correlation_id: str
    accepted_at: int
    payload: bytes | None

    def json(self) -> object:
        return json.loads(self.payload) if self.payload else None


@dataclass(frozen=True)
class SuspendOutcome:
    suspension_id: str
    waitpoint_id: str
    waitpoint_key: str
    #: The bearer token a signaller needs (contract §8); hand it over, never log it.
    token: str
    already_satisfied: bool = False
    #: With `already_satisfied`: the buffered signals that satisfied the condition.
    signals: list[ResumeSignal] = field(default_factory=list)


def condition_json(names: Sequence[str], timeout_behavior: str) -> str:
    """Resume condition (contract §7.3): no names = any signal, one name = it, several = all of them."""
    return json.dumps({"condition_type": "signal_set", "required_signal_names": list(names),
                       "signal_match_mode": "any" if len(names) <= 1 else "all", "minimum_signal_count": 1,
                       "timeout_behavior": timeout_behavior, "allow_operator_override": True},
                      separators=(",", ":"))


def _names(conditions: str | Sequence[str] | None) -> list[str]:
    if conditions is None:
        return []
    names = [conditions] if isinstance(conditions, str) else list(conditions)
    if not all(isinstance(n, str) for n in names):
        raise TypeError("signal names must be strings")
    return names


def matched_signals(backend: Backend, ix: PartitionKeys, waitpoint_id: str) -> list[ResumeSignal]:
    """Signals that satisfied a matcher of the waitpoint's condition, in matcher order (three pipelines)."""
    cond = decode_map(backend.client.hgetall(ix.waitpoint_condition(waitpoint_id)))
    ids = [cond.get(f"matcher:{i}:signal_id", "") for i in range(len(matcher_names(cond)))
           if cond.get(f"matcher:{i}:satisfied") == "1"]
    ids = [s for s in ids if s]
    if not ids:
        return []
    pipe = backend.client.pipeline(transaction=False)
    for sid in ids:
        pipe.hgetall(ix.signal(sid))
        pipe.get(ix.signal_payload(sid))
    raw = pipe.execute()
    out = []
    for i, sid in enumerate(ids):
        h = decode_map(raw[2 * i])
        if not h:
            continue
        payload = raw[2 * i + 1]
        at = h.get("accepted_at", "")
        out.append(ResumeSignal(sid, h.get("signal_name", ""), h.get("signal_category", ""), h.get("source_type", ""),
                                h.get("source_identity", ""), h.get("correlation_id", ""),
                                int(at) if at.isdigit() else 0, None if payload is None else bytes(payload)))
    return out


class SuspendOps:
    """Methods here use the ClaimedTask attributes (backend, keys, fence, execution_id, attempt_index, ...)."""

    if TYPE_CHECKING:
        backend: Backend
        execution_id: ExecutionId
        attempt_index: int
        consumed: bool
        on_done: Callable[[ClaimedTask], None] | None

        @property
        def keys(self) -> ExecKeys: ...

        @property
        def fence(self) -> F.Fence: ...

        def _check(self, reply_error: ScriptError) -> None: ...

        def _release_admission(self) -> None: ...

    # ------------------------------------------------------------ pending waitpoints
    def create_pending_waitpoint(self, waitpoint_key: str | None = None,
                                 expires_in_ms: int = 3_600_000) -> PendingWaitpoint:
        """A waitpoint that accepts (buffers) signals before the task suspends on it; pass it to
        `suspend(waitpoint=...)`. Unused, it is closed by the expiry scanner after `expires_in_ms`."""
        if expires_in_ms <= 0:
            raise ValueError("expires_in_ms must be positive")
        wid = new_uuid()
        key = waitpoint_key or f"wpk:{wid}"
        expires_at = self.backend.now_ms() + expires_in_ms
        try:
            reply = self.backend.call(F.create_pending_waitpoint(self.keys, attempt_index=self.attempt_index,
                                                                 waitpoint_id=wid, waitpoint_key=key,
                                                                 expires_at=expires_at))
        except ScriptError as e:
            self._check(e)
            raise
        # Ours: the execution's waitpoint set also names pending waitpoints, so readers listing an
        # execution's open waitpoints find them before activation (the suspend adds them anyway).
        self.backend.client.sadd(self.keys.waitpoints, wid)
        return PendingWaitpoint(reply[0], reply[1], "pending", reply[2], self.execution_id, [], 0, None, expires_at)

    # ------------------------------------------------------------ suspend
    def suspend(self, conditions: str | Sequence[str] | None = None, timeout_ms: int | None = None,
                timeout_behavior: str = "fail", *, reason_code: str = "waiting_for_signal",
                waitpoint: PendingWaitpoint | None = None, timeout_at: int | None = None,
                continuation: str = "") -> SuspendOutcome:
        """Release the lease and wait for signals: `conditions` is one name, several names (all required)
        or None/[] (any signal). After `timeout_ms` the scanner applies `timeout_behavior` (fail, cancel,
        expire, auto_resume, auto_resume_with_timeout_signal, escalate)."""
        names = _names(conditions)
        if timeout_behavior not in TIMEOUT_BEHAVIORS:
            raise ValueError(f"timeout_behavior {timeout_behavior!r} is not one of {sorted(TIMEOUT_BEHAVIORS)}")
        if timeout_ms is not None and timeout_ms <= 0:
            raise ValueError("timeout_ms must be positive")
        if timeout_ms is not None:
            timeout_at = self.backend.now_ms() + timeout_ms
        sid = new_uuid()
        wid = waitpoint.waitpoint_id if waitpoint else new_uuid()
        call = F.suspend_execution(
            self.keys, self.fence, suspension_id=sid, waitpoint_id=wid, waitpoint_key=f"wpk:{wid}",
            condition_json=condition_json(names, timeout_behavior),
            policy_json=json.dumps(RESUME_POLICY, separators=(",", ":")), reason_code=reason_code,
            timeout_at=timeout_at, timeout_behavior=timeout_behavior, use_pending=waitpoint is not None,
            continuation=continuation)
        if self.consumed:
            raise TaskConsumed(f"{self.execution_id}: a terminal operation was already called")
        # Consumed while the call is in flight so a racing renewal's "not active" is not taken as a loss.
        self.consumed = True
        try:
            reply = self._suspend_call(call, sid, wid)
        except ScriptError as e:
            if e.code in LEASE_GONE:
                self._check(e)
                self._finish()
            else:  # refused before any write: the lease is still ours
                self.consumed = False
            raise
        except BaseException:
            self._finish()
            raise
        if reply.status == "ALREADY_SATISFIED":
            self.consumed = False
            return SuspendOutcome(reply[0], reply[1], reply[2], reply[3], True,
                                  matched_signals(self.backend, self.keys.idx, reply[1]))
        self._finish(suspended=True)
        return SuspendOutcome(reply[0], reply[1], reply[2], reply[3])

    def _finish(self, suspended: bool = False) -> None:
        if suspended:
            self._release_admission()  # a suspended attempt holds no quota concurrency slot
        events.publish(self.backend, ids=[self.execution_id])  # a hint for live pages (buffered)
        if self.on_done is not None:
            self.on_done(self)  # type: ignore[arg-type]

    def _suspend_call(self, call: F.Call, sid: str, wid: str) -> F.Reply:
        try:
            return self.backend.call(call)
        except TRANSPORT as e:
            # The reply was lost: ask the records whether our suspension (or its satisfied shortcut) landed.
            pipe = self.backend.client.pipeline(transaction=False)
            pipe.hget(self.keys.core, "current_suspension_id")
            pipe.hmget(self.keys.idx.waitpoint(wid), ["suspension_id", "state", "waitpoint_key", "waitpoint_token"])
            cur, (wsid, state, wkey, token) = pipe.execute()
            if text(cur) == sid:
                return F.Reply("OK", [sid, wid, text(wkey), text(token)])
            if text(wsid) == sid and text(state) == "closed":
                return F.Reply("ALREADY_SATISFIED", [sid, wid, text(wkey), text(token)])
            log.warning("%s: suspend reply lost (%s); retrying once", self.execution_id, e)
            return self.backend.call(call)

    # ------------------------------------------------------------ after a resumed claim
    def resume_signals(self) -> list[ResumeSignal]:
        """The signals that resumed this attempt (worker-sdk §3.5): [] if it was resumed otherwise
        (timeout auto-resume, operator resume) or the suspension belongs to an earlier attempt."""
        susp = decode_map(self.backend.client.hgetall(self.keys.suspension_current))
        if (not susp or susp.get("attempt_index") != str(self.attempt_index)
                or susp.get("close_reason") != "resumed" or not susp.get("waitpoint_id")):
            return []
        return matched_signals(self.backend, self.keys.idx, susp["waitpoint_id"])
