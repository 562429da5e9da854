"""cancel_flow with a durable per-partition backlog (server.md §2.5 #17/#18, v0.13's resumable cancel).

`ff_cancel_flow` in v0.13's shape flips the flow to cancelled and, for `cancel_all`, records every member in
the flow's `pending_cancels` set and the flow in its partition's `cancel_backlog` ZSET (due after a grace
period) — one atomic call. Member cancels are then dispatched — inline in wait mode, on a background
thread otherwise — and each member cancelled (or found already ended) is acknowledged with
`ff_ack_cancel_member`, which also takes the flow off the backlog with the last one. A dispatcher that dies
half-way leaves the rest pending; the cancel reconciler scanner resumes overdue backlogs member by member.
`ff_cancel_execution` refuses an already-terminal execution, so every member is cancelled exactly once
however often this runs.

Wait mode may be bounded (`timeout_ms`): members not reached by then are left to a background dispatcher
(status "scheduled", `timed_out`). A wait that ends with members whose cancel failed is "partially_cancelled"
(`failed` lists them; they stay pending for a retry or the reconciler). Calling it again on a terminal flow
is idempotent: no writes, "already_terminal" with the stored policy, reason and members.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from ffcore import events, keys
from ffcore import functions as F
from ffcore.backend import Backend
from ffcore.errors import ERRORS, ScriptError
from ffcore.flows.reads import partition_of
from ffcore.keys import ExecKeys, FlowKeys
from ffcore.reads import core_refs_many, text

log = logging.getLogger("ffcore.flows.cancel")

CANCEL_ALL = "cancel_all"
#: Member cancels in flight at once (one pipeline each).
DISPATCH_CHUNK = 16
#: An overdue backlog is taken over by the reconciler after this long (the dispatcher goes first).
DEFAULT_GRACE_MS = 30_000
#: Members returned for an already-cancelled flow (server.md: ALREADY_TERMINAL_MEMBER_CAP).
ALREADY_TERMINAL_MEMBER_CAP = 1000
#: Replies meaning "this member needs no cancel": acknowledged like a cancel.
_DONE = frozenset({"execution_not_active", "execution_not_found"})


@dataclass
class DrainReport:
    cancelled: list[str] = field(default_factory=list)
    already_terminal: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    #: Members still pending afterwards (0 = the backlog entry is gone).
    remaining: int = 0
    #: The wait's timeout ended this pass before every pending member was tried.
    timed_out: bool = False


@dataclass
class CancelOutcome:
    #: "cancelled" (done: wait mode, or nothing to dispatch), "scheduled" (members cancelled in the background,
    #: also after a wait that timed out), "partially_cancelled" (wait mode; some member cancels failed) or
    #: "already_terminal" (the flow had ended before: nothing written).
    status: str
    policy: str
    members: list[str]
    report: DrainReport | None = None
    #: The stored cancel reason of an already-terminal flow (None if it never was cancelled).
    reason: str | None = None

    @property
    def failed(self) -> list[str]:
        """Members whose cancel failed in wait mode (still pending: retried by the cancel reconciler)."""
        return self.report.failed if self.report is not None else []

    @property
    def timed_out(self) -> bool:
        return self.report is not None and self.report.timed_out


def cancel_flow(backend: Backend, flow_id: str, *, reason: str, policy: str = CANCEL_ALL, wait: bool = False,
                grace_ms: int = DEFAULT_GRACE_MS, timeout_ms: int | None = None) -> CancelOutcome:
    """Cancel a flow; see the module. `timeout_ms` bounds a wait (None: until every member was tried)."""
    n = partition_of(backend, flow_id)
    try:
        reply = backend.call(F.cancel_flow(n, flow_id, reason=reason, policy=policy, grace_ms=grace_ms))
    except ERRORS["flow_already_terminal"]:
        return _already_terminal(backend, n, flow_id, policy)
    members = reply.fields[1:]
    if policy != CANCEL_ALL or not members:
        return CancelOutcome("cancelled", policy, members)
    if wait:
        deadline = None if timeout_ms is None else time.monotonic() + timeout_ms / 1000
        rep = drain_flow(backend, n, flow_id, grace_ms=grace_ms, deadline=deadline)
        if rep.timed_out and rep.remaining:
            _dispatch_in_background(backend, n, flow_id, grace_ms)
            return CancelOutcome("scheduled", policy, members, rep)
        return CancelOutcome("partially_cancelled" if rep.failed else "cancelled", policy, members, rep)
    _dispatch_in_background(backend, n, flow_id, grace_ms)
    return CancelOutcome("scheduled", policy, members)


def _already_terminal(backend: Backend, n: int, flow_id: str, policy: str) -> CancelOutcome:
    """The idempotent answer: the stored policy (the caller's when none was stored) and reason, members capped."""
    fk = FlowKeys(n, flow_id)
    pipe = backend.client.pipeline(transaction=False)
    pipe.hmget(fk.core, ["cancellation_policy", "cancel_reason"])
    pipe.srandmember(fk.members, ALREADY_TERMINAL_MEMBER_CAP)
    (stored_policy, stored_reason), members = pipe.execute()
    return CancelOutcome("already_terminal", text(stored_policy) or policy, sorted(text(m) for m in members),
                         reason=text(stored_reason) or None)


def _dispatch_in_background(backend: Backend, n: int, flow_id: str, grace_ms: int) -> None:
    threading.Thread(target=_drain_quietly, args=(backend, n, flow_id, grace_ms), daemon=True,
                     name=f"cancel-flow-{flow_id[:8]}").start()


def _drain_quietly(backend: Backend, n: int, flow_id: str, grace_ms: int) -> None:
    try:
        drain_flow(backend, n, flow_id, grace_ms=grace_ms)
    except Exception:  # the backlog keeps the rest; the reconciler finishes it
        log.exception("cancel dispatch of flow %s stopped; the cancel reconciler will finish it", flow_id)


def drain_flow(backend: Backend, n: int, flow_id: str, *, limit: int | None = None,
               grace_ms: int = DEFAULT_GRACE_MS, deadline: float | None = None) -> DrainReport:
    """Cancel the pending members of a cancelled flow (at most `limit`; stopping between chunks once the
    monotonic `deadline` passed), acknowledging each with `ff_ack_cancel_member`."""
    fk = FlowKeys(n, flow_id)
    pending, backlog = keys.flow_pending_cancels(n, flow_id), keys.cancel_backlog(n)
    pipe = backend.client.pipeline(transaction=False)
    pipe.hget(fk.core, "cancel_reason")
    pipe.smembers(pending)
    reason_raw, members_raw = pipe.execute()
    todo = sorted(text(m) for m in members_raw)
    if limit is not None:
        todo = todo[:limit]
    reason = text(reason_raw) or "flow cancelled"
    rep = DrainReport()
    for i in range(0, len(todo), DISPATCH_CHUNK):
        if deadline is not None and time.monotonic() >= deadline:
            rep.timed_out = True
            break
        chunk = todo[i:i + DISPATCH_CHUNK]
        eks = [ExecKeys(e) for e in chunk]
        calls = [F.cancel_execution(k, r, reason=reason, source="operator_override")
                 for k, r in zip(eks, core_refs_many(backend, eks), strict=True)]
        acked = []
        for e, reply in zip(chunk, backend.call_many(calls), strict=True):
            if not isinstance(reply, ScriptError):
                rep.cancelled.append(e)
                acked.append(e)
            elif reply.code in _DONE:
                rep.already_terminal.append(e)
                acked.append(e)
            else:  # e.g. a script raise: stays pending for the next pass
                rep.failed.append(e)
                log.warning("cancel of flow member %s failed: %s", e, reply)
        for r in backend.call_many([F.ack_cancel_member(n, flow_id, e) for e in acked]):
            if isinstance(r, ScriptError):
                raise r
        events.publish(backend, ids=chunk, flows=[flow_id])  # live pages: members turn cancelled as it goes
    rep.remaining = int(backend.client.scard(pending))
    if backend.upstream is not None:
        return rep  # the last ack took the flow off upstream's backlog; its own reconciler owns the rest
    if rep.remaining:
        # Not all acknowledged: due again after the grace (the reconciler resumes from the pending set).
        backend.client.zadd(backlog, {flow_id: backend.now_ms() + grace_ms})
    else:
        backend.client.zrem(backlog, flow_id)  # a flow whose pending set emptied elsewhere
    return rep


def backlog_depth(backend: Backend, flows_per_partition: int = 1000) -> int:
    """Member cancels not yet acknowledged, over every partition's backlog (two round trips; at most
    `flows_per_partition` flows per partition are counted, so a runaway backlog cannot make it slow)."""
    parts = range(backend.settings.partitions.flow)
    pipe = backend.client.pipeline(transaction=False)
    for n in parts:
        pipe.zrange(keys.cancel_backlog(n), 0, flows_per_partition - 1)
    flows = [(n, text(f)) for n, batch in zip(parts, pipe.execute(), strict=True) for f in batch]
    if not flows:
        return 0
    pipe = backend.client.pipeline(transaction=False)
    for n, f in flows:
        pipe.scard(keys.flow_pending_cancels(n, f))
    return sum(int(x) for x in pipe.execute())
