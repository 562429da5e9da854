"""cancel_flow with a durable per-partition backlog (server.md §2.5 #17/#18 and the HEAD cancel reconciler).

One MULTI/EXEC (WATCHing the flow core) runs `ff_cancel_flow`, copies the member set into the flow's
`pending_cancels` set and schedules the flow in its partition's `cancel_backlog` ZSET (due after a
grace period). Member cancels are then dispatched — inline in wait mode, on a background thread
otherwise — and each acknowledged member (cancelled now, or already terminal) leaves the pending set.
When the set is empty the flow leaves the backlog. A dispatcher that dies half-way leaves the rest
pending; the cancel reconciler scanner picks overdue backlogs up. `ff_cancel_execution` refuses an
already-terminal execution, so every member is cancelled exactly once however often this runs.

Calling it again on a cancelled flow is idempotent: no writes, the stored policy and members.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

import redis

from ffcore import events, keys
from ffcore import functions as F
from ffcore.backend import Backend
from ffcore.errors import ERRORS, FFError, ScriptError
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


@dataclass
class CancelOutcome:
    #: "cancelled" (done, wait mode or nothing to dispatch), "scheduled" (async) or "already_terminal".
    status: str
    policy: str
    members: list[str]
    report: DrainReport | None = None


def cancel_flow(backend: Backend, flow_id: str, *, reason: str, policy: str = CANCEL_ALL, wait: bool = False,
                grace_ms: int = DEFAULT_GRACE_MS) -> CancelOutcome:
    n = partition_of(backend, flow_id)
    fk = FlowKeys(n, flow_id)
    pending, backlog = keys.flow_pending_cancels(n, flow_id), keys.cancel_backlog(n)
    for _ in range(20):
        with backend.client.pipeline(transaction=True) as pipe:
            try:
                pipe.watch(fk.core)
                state, stored_policy = pipe.hmget(fk.core, ["public_flow_state", "cancellation_policy"])
                if state is None:
                    raise ERRORS["flow_not_found"]("flow_not_found", [flow_id], "ff_cancel_flow")
                if text(state) in ("cancelled", "completed", "failed"):
                    pipe.unwatch()
                    members = [text(m) for m in backend.client.srandmember(fk.members, ALREADY_TERMINAL_MEMBER_CAP)]
                    return CancelOutcome("already_terminal", text(stored_policy) or policy, sorted(members))
                call = F.cancel_flow(n, flow_id, reason=reason, policy=policy)
                now = backend.now_ms()
                pipe.multi()
                pipe.fcall(call.function, len(call.keys), *call.keys, *call.args)
                if policy == CANCEL_ALL:
                    # By name: redis-py's cluster pipeline refuses its sunionstore() method even for keys of one
                    # slot (these share the flow's tag).
                    pipe.execute_command("SUNIONSTORE", pending, pending, fk.members)
                    pipe.zadd(backlog, {flow_id: now + grace_ms})
                raw = pipe.execute(raise_on_error=False)
            except redis.WatchError:
                continue
        reply = call.parse(call.function, raw[0])
        members = reply.fields[1:]
        if policy != CANCEL_ALL or not members:
            if policy == CANCEL_ALL:
                backend.client.zrem(backlog, flow_id)
            return CancelOutcome("cancelled", policy, members)
        if wait:
            return CancelOutcome("cancelled", policy, members, drain_flow(backend, n, flow_id, grace_ms=grace_ms))
        threading.Thread(target=_drain_quietly, args=(backend, n, flow_id, grace_ms), daemon=True,
                         name=f"cancel-flow-{flow_id[:8]}").start()
        return CancelOutcome("scheduled", policy, members)
    raise FFError(f"flow {flow_id} kept changing under us; try again")


def _drain_quietly(backend: Backend, n: int, flow_id: str, grace_ms: int) -> None:
    try:
        drain_flow(backend, n, flow_id, grace_ms=grace_ms)
    except Exception:  # the backlog keeps the rest; the reconciler finishes it
        log.exception("cancel dispatch of flow %s stopped; the cancel reconciler will finish it", flow_id)


def drain_flow(backend: Backend, n: int, flow_id: str, *, limit: int | None = None,
               grace_ms: int = DEFAULT_GRACE_MS) -> DrainReport:
    """Cancel the pending members of a cancelled flow (at most `limit`), acknowledging each."""
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
        if acked:
            backend.client.srem(pending, *acked)
        events.publish(backend, ids=chunk, flows=[flow_id])  # live pages: members turn cancelled as it goes
    rep.remaining = int(backend.client.scard(pending))
    if rep.remaining == 0:
        backend.client.zrem(backlog, flow_id)
    else:
        backend.client.zadd(backlog, {flow_id: backend.now_ms() + grace_ms})
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
