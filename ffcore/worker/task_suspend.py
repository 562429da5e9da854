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

Typed conditions (ffcore.suspension.conditions, operations §6.2):

    task.suspend(any_of("approve", "reject"))                    # either name resumes
    task.suspend(quorum(2, of=3, name="approve"))                # 2 of 3 approvers
    out = task.suspend(AllOf(wait_on("legal", "ok"), wait_on("finance", "ok")), idempotency_key="review-1")
    out.token_for("legal"), out.token_for("finance")             # one waitpoint (and token) per member

An `idempotency_key` makes the suspend repeatable: the same key on the same execution returns the first
outcome (`replayed=True`) and changes nothing — no second suspension, the task keeps its lease.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ffcore import events
from ffcore import functions as F
from ffcore.errors import ScriptError
from ffcore.ids import ExecutionId, new_uuid
from ffcore.keys import ExecKeys, PartitionKeys
from ffcore.reads import decode_map, text
from ffcore.suspension import conditions as C
from ffcore.suspension.resume_policy import ResumePolicy
from ffcore.suspension.signals import PendingWaitpoint, composite_signal_ids, matcher_names, suspension_waitpoint_ids
from ffcore.worker.task_ops import LEASE_GONE, TRANSPORT, TaskConsumed

if TYPE_CHECKING:
    from ffcore.backend import Backend
    from ffcore.worker.task import ClaimedTask

log = logging.getLogger("ffcore.worker.task")

TIMEOUT_BEHAVIORS = frozenset({"fail", "cancel", "expire", "auto_resume", "auto_resume_with_timeout_signal",
                               "escalate"})
#: The seed's canonical defaults (retain_signal_buffer_until_closed false), stored when a suspend gives none.
_DEFAULT_RESUME = ResumePolicy()


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
class AdditionalWaitpoint:
    waitpoint_id: str
    waitpoint_key: str
    token: str


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
    #: A composite's other waitpoints (operations §6.2 additional_waitpoints), each with its own token.
    additional_waitpoints: list[AdditionalWaitpoint] = field(default_factory=list)
    #: True when an idempotency key replayed an earlier suspend (nothing changed; the task keeps its lease).
    replayed: bool = False

    def token_for(self, waitpoint_key: str) -> str:
        """The token of the waitpoint with this key (the primary's or an additional one's)."""
        if waitpoint_key == self.waitpoint_key:
            return self.token
        for w in self.additional_waitpoints:
            if w.waitpoint_key == waitpoint_key:
                return w.token
        raise KeyError(waitpoint_key)

    def waitpoint_id_for(self, waitpoint_key: str) -> str:
        if waitpoint_key == self.waitpoint_key:
            return self.waitpoint_id
        for w in self.additional_waitpoints:
            if w.waitpoint_key == waitpoint_key:
                return w.waitpoint_id
        raise KeyError(waitpoint_key)


def condition_json(names: Sequence[str], timeout_behavior: str) -> str:
    """Resume condition (contract §7.3): no names = any signal, one name = it, several = all of them."""
    return C.wire_json(C.coerce(list(names)), timeout_behavior)


def _text_field(value: object, field: str, limit: int = 256, *, empty_ok: bool = False) -> str:
    if not isinstance(value, str) or (not value and not empty_ok) or len(value) > limit:
        raise ValueError(f"{field}: a {'' if empty_ok else 'non-empty '}string of at most {limit} characters")
    if any(ord(ch) < 0x20 for ch in value):
        raise ValueError(f"{field}: control characters are not allowed")
    return value


def matched_signals(backend: Backend, ix: PartitionKeys, waitpoint_id: str) -> list[ResumeSignal]:
    """Signals that satisfied a matcher of the waitpoint's condition, in matcher order (three pipelines)."""
    cond = decode_map(backend.client.hgetall(ix.waitpoint_condition(waitpoint_id)))
    ids = [cond.get(f"matcher:{i}:signal_id", "") for i in range(len(matcher_names(cond)))
           if cond.get(f"matcher:{i}:satisfied") == "1"]
    return signals_by_id(backend, ix, [s for s in ids if s])


def signals_by_id(backend: Backend, ix: PartitionKeys, ids: list[str]) -> list[ResumeSignal]:
    """The signal records of these ids, in this order (vanished ones skipped)."""
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


def _dedup_ttl(now: int, timeout_at: int | None) -> int:
    """Operations §1.5: min(timeout_at - now + 60 s, 7 d)."""
    week = 7 * 86_400_000
    return week if timeout_at is None else max(60_000, min(timeout_at - now + 60_000, week))


def _typed_outcome(reply: F.Reply, sid: str) -> SuspendOutcome:
    f = reply.fields
    n = int(f[4]) if len(f) > 4 and f[4].isdigit() else 0
    extras = [AdditionalWaitpoint(f[5 + 3 * j], f[6 + 3 * j], f[7 + 3 * j]) for j in range(n)]
    return SuspendOutcome(f[0], f[1], f[2], f[3], reply.status == "ALREADY_SATISFIED", [], extras,
                          replayed=f[0] != sid)


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
    def suspend(self, conditions: C.Condition | str | Sequence[str] | None = None, timeout_ms: int | None = None,
                timeout_behavior: str = "fail", *, reason_code: str = "waiting_for_signal",
                waitpoint: PendingWaitpoint | None = None, timeout_at: int | None = None,
                continuation: str = "", requested_by: str = "worker", idempotency_key: str | None = None,
                waitpoint_key: str | None = None, resume_policy: ResumePolicy | None = None) -> SuspendOutcome:
        """Release the lease and wait for signals. `conditions`: one name, several names (all required),
        None/[] (any signal), or a typed condition — any_of(...), all_of(...), n_of(n, ...),
        quorum(n, of=m, name=...), or AllOf / AtLeast over wait_on(key, ...) waitpoints (one waitpoint and
        token per member). After `timeout_ms` the scanner applies `timeout_behavior` (fail, cancel, expire,
        auto_resume, auto_resume_with_timeout_signal, escalate). `requested_by`: worker, operator, policy or
        system_timeout_policy. `idempotency_key`: a repeat returns the first outcome (`replayed`).
        `resume_policy` is stored with the suspension (default: the seed's ResumePolicy()).
        Bad input raises ValueError naming the field, before anything is sent."""
        cond = C.coerce(conditions)
        composite = C.is_composite(cond)
        leaves = C.leaves(cond) if composite else []
        if timeout_behavior not in TIMEOUT_BEHAVIORS:
            raise ValueError(f"timeout_behavior: {timeout_behavior!r} is not one of {sorted(TIMEOUT_BEHAVIORS)}")
        if requested_by not in C.REQUESTERS:
            raise ValueError(f"requested_by: {requested_by!r} is not one of {', '.join(C.REQUESTERS)}")
        _text_field(reason_code, "reason_code")
        _text_field(continuation, "continuation", 4096, empty_ok=True)
        if idempotency_key is not None:
            _text_field(idempotency_key, "idempotency_key")
        if waitpoint_key is not None:
            _text_field(waitpoint_key, "waitpoint_key")
        if timeout_ms is not None and (isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int)
                                       or timeout_ms <= 0):
            raise ValueError("timeout_ms: must be a positive whole number of milliseconds")
        if waitpoint is not None and (composite or idempotency_key is not None or waitpoint_key is not None):
            raise ValueError("waitpoint: a pending waitpoint takes a signal-name condition, without "
                             "idempotency_key or waitpoint_key")
        if composite and waitpoint_key is not None:
            raise ValueError("waitpoint_key: a composite names its waitpoints with wait_on(key, ...)")
        now = self.backend.now_ms()
        if timeout_ms is not None:
            timeout_at = now + timeout_ms
        if timeout_at is not None and (isinstance(timeout_at, bool) or not isinstance(timeout_at, int)
                                       or timeout_at < now - 600_000):
            raise ValueError("timeout_at: timeout_at_in_past (more than 10 minutes ago) or not a whole number of ms")
        if cond == C.timeout_only() and timeout_at is None:
            raise ValueError("timeout_ms: timeout_only_without_deadline (timeout_only() needs a timeout)")
        sid = new_uuid()
        if resume_policy is not None and not isinstance(resume_policy, ResumePolicy):
            raise ValueError("resume_policy: must be a ResumePolicy")
        policy = (resume_policy or _DEFAULT_RESUME).to_json()
        typed = composite or idempotency_key is not None or waitpoint_key is not None
        if typed:
            if composite:
                ids = {w.key: new_uuid() for w in leaves}
                bindings = [(ids[w.key], w.key) for w in leaves]
            else:
                wid = new_uuid()
                ids, bindings = {}, [(wid, waitpoint_key or f"wpk:{wid}")]
            wid = bindings[0][0]
            call = F.suspend_typed(
                self.keys, self.fence, suspension_id=sid, waitpoints=bindings,
                condition_json=C.wire_json(cond, timeout_behavior), policy_json=policy,
                reason_code=reason_code, requested_by=requested_by, timeout_at=timeout_at,
                timeout_behavior=timeout_behavior, continuation=continuation,
                idempotency_key=idempotency_key or "", dedup_ttl_ms=_dedup_ttl(now, timeout_at))
        else:
            wid = waitpoint.waitpoint_id if waitpoint else new_uuid()
            call = F.suspend_execution(
                self.keys, self.fence, suspension_id=sid, waitpoint_id=wid, waitpoint_key=f"wpk:{wid}",
                condition_json=C.wire_json(cond, timeout_behavior), policy_json=policy, reason_code=reason_code,
                requested_by=requested_by, timeout_at=timeout_at, timeout_behavior=timeout_behavior,
                use_pending=waitpoint is not None, continuation=continuation)
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
        if typed:
            out = _typed_outcome(reply, sid)
            if out.replayed:  # an earlier suspend with this key: nothing changed, the lease is as it was
                self.consumed = False
                return out
            self._finish(suspended=True)
            return out
        if reply.status == "ALREADY_SATISFIED":
            self.consumed = False
            return SuspendOutcome(reply[0], reply[1], reply[2], reply[3], True,
                                  matched_signals(self.backend, self.keys.idx, reply[1]))
        self._finish(suspended=True)
        return SuspendOutcome(reply[0], reply[1], reply[2], reply[3])

    async def asuspend(self, *args: Any, **kw: Any) -> SuspendOutcome:
        """`suspend` for async handlers (the call runs in a thread, as acomplete does)."""
        return await asyncio.to_thread(self.suspend, *args, **kw)

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
                if call.function == "ff_suspend_typed":
                    return self._typed_landed(sid, wid, text(wkey), text(token))
                return F.Reply("OK", [sid, wid, text(wkey), text(token)])
            if text(wsid) == sid and text(state) == "closed":
                return F.Reply("ALREADY_SATISFIED", [sid, wid, text(wkey), text(token)])
            log.warning("%s: suspend reply lost (%s); retrying once", self.execution_id, e)
            return self.backend.call(call)

    def _typed_landed(self, sid: str, wid: str, wkey: str, token: str) -> F.Reply:
        """The reply a landed typed suspend gave: its extra waitpoints and their tokens from the records."""
        extras = text(self.backend.client.hget(self.keys.suspension_current, "additional_waitpoints_json"))
        ids = suspension_waitpoint_ids({"additional_waitpoints_json": extras})
        fields = [sid, wid, wkey, token, str(len(ids))]
        for x in ids:
            xkey, xtoken = map(text, self.backend.client.hmget(self.keys.idx.waitpoint(x),
                                                               ["waitpoint_key", "waitpoint_token"]))
            fields += [x, xkey, xtoken]
        return F.Reply("OK", fields)

    # ------------------------------------------------------------ after a resumed claim
    def resume_signals(self) -> list[ResumeSignal]:
        """The signals that resumed this attempt (worker-sdk §3.5): [] if it was resumed otherwise
        (timeout auto-resume, operator resume) or the suspension belongs to an earlier attempt."""
        susp = decode_map(self.backend.client.hgetall(self.keys.suspension_current))
        if (not susp or susp.get("attempt_index") != str(self.attempt_index)
                or susp.get("close_reason") != "resumed" or not susp.get("waitpoint_id")):
            return []
        if susp.get("composite") == "1":
            ids = composite_signal_ids(susp.get("all_satisfier_signals", ""))
            return signals_by_id(self.backend, self.keys.idx, ids)
        return matched_signals(self.backend, self.keys.idx, susp["waitpoint_id"])
