"""Sibling cancel (v0.13): the upstreams an `any_of` / `quorum` group with `cancel_remaining` no longer needs.

When such a group fires, `ff_resolve_dependency` lists the upstreams still running in the group record
(`cancel_siblings_pending_members`, flag `cancel_siblings_pending_flag`) and queues `<flow>|<downstream>` in
its partition's `pending_cancel_groups` set, all in the same call. `dispatch` cancels each listed sibling
(`ff_cancel_execution`; one that ended meanwhile needs nothing) and then drains the group
(`ff_drain_sibling_cancel_group`: flag and list cleared, tuple removed, and — ours — the siblings it really
cancelled added to `FlowKeys.edgegroup_cancelled` for the DAG view). A sibling whose cancel fails keeps the
group queued for the next pass. `reconcile` is the crash net (`ff_reconcile_sibling_cancel_group`): it drops
stale tuples and finishes a drain whose cancels all landed; it never touches a group with a sibling running.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from ffcore import events, keys
from ffcore import functions as F
from ffcore.backend import Backend
from ffcore.errors import ScriptError
from ffcore.keys import ExecKeys, FlowKeys
from ffcore.reads import core_refs_many, text

log = logging.getLogger("ffcore.flows.sibling_cancel")

#: Replies meaning "this sibling ended on its own": nothing to cancel.
_ENDED = frozenset({"execution_not_active", "execution_not_found"})
#: Sibling cancels in flight at once (one pipeline each).
CHUNK = 32


@dataclass
class SiblingReport:
    cancelled: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    drained: int = 0


def _queued(backend: Backend, partitions: Sequence[int], limit: int) -> list[tuple[int, str, str]]:
    pipe = backend.client.pipeline(transaction=False)
    for n in partitions:
        pipe.srandmember(keys.pending_cancel_groups(n), limit)
    out = []
    for n, found in zip(partitions, pipe.execute() if partitions else [], strict=True):
        for t in sorted(text(x) for x in found):
            flow_id, _, down = t.partition("|")
            if flow_id and down:
                out.append((n, flow_id, down))
    return out


def dispatch(backend: Backend, partitions: Sequence[int], limit: int = 100) -> SiblingReport:
    """Cancel the siblings owed by up to `limit` queued groups per partition, then drain each group."""
    rep = SiblingReport()
    groups = _queued(backend, partitions, limit)
    if not groups:
        return rep
    pipe = backend.client.pipeline(transaction=False)
    for n, f, down in groups:
        pipe.hmget(FlowKeys(n, f).edgegroup(down), ["cancel_siblings_pending_flag", "cancel_siblings_pending_members",
                                                    "cancel_siblings_reason"])
    for (n, f, down), (flag, members, reason) in zip(groups, pipe.execute(), strict=True):
        if text(flag) != "true":
            continue  # a drain that stopped half-way: the reconciler's case
        siblings = [s for s in text(members).split("|") if s]
        cancelled, failed = [], []
        for i in range(0, len(siblings), CHUNK):
            chunk = siblings[i:i + CHUNK]
            eks = [ExecKeys(s) for s in chunk]
            calls = [F.cancel_execution(k, r, reason=text(reason) or "sibling_quorum_satisfied",
                                        source="operator_override")
                     for k, r in zip(eks, core_refs_many(backend, eks), strict=True)]
            for s, reply in zip(chunk, backend.call_many(calls), strict=True):
                if not isinstance(reply, ScriptError):
                    cancelled.append(s)
                elif reply.code not in _ENDED:
                    failed.append(s)
                    log.warning("sibling cancel of %s (group of %s) failed: %s", s, down, reply)
        rep.cancelled += cancelled
        rep.failed += failed
        if failed:
            # Stays queued; the cancels that landed are recorded now so a retry (which finds them ended) keeps them.
            if cancelled:
                backend.client.sadd(FlowKeys(n, f).edgegroup_cancelled(down), *cancelled)
        else:
            backend.call(F.drain_sibling_cancel_group(n, f, down, cancelled))
            rep.drained += 1
        if siblings:
            events.publish(backend, ids=siblings, flows=[f])
    return rep


def reconcile(backend: Backend, n: int, limit: int = 100) -> int:
    """One reconciler pass over partition `n`'s queued groups; returns how many tuples it cleared."""
    groups = _queued(backend, [n], limit)
    replies = backend.call_many([F.reconcile_sibling_cancel_group(n, f, down) for _, f, down in groups])
    return sum(1 for r in replies if not isinstance(r, ScriptError) and r.fields[:1] != ["no_op"])
