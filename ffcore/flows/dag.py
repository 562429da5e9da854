"""Dependency resolution: when a flow member finishes, resolve its outgoing edges.

A `success` upstream satisfies each edge (the child becomes eligible once none remain); any other
outcome makes the edge impossible and skips a child that has not finished — for an `all_of` group; an
`any_of` / `quorum` group decides its child by counts (`ffcore.flows.edge_groups`), and siblings its
firing owes a cancel are cancelled right after (`ffcore.flows.sibling_cancel`). The library does not
publish a completion for a skipped child, so the cascade continues here, level by level, until no
more children are skipped. Every call is idempotent (`already_resolved`), so the completion listener
and the dependency reconciler may both resolve the same edge.

Members of a flow cancelled with `cancel_all` are left alone: the cancel cascade owns them, and
skipping them here would race it (they must end `cancelled`, each exactly once).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from ffcore import functions as F
from ffcore import wake
from ffcore.backend import Backend
from ffcore.errors import ScriptError
from ffcore.ids import ExecutionId
from ffcore.keys import ExecKeys, FlowKeys
from ffcore.reads import text

from . import sibling_cancel

log = logging.getLogger("ffcore.flows.dag")

#: Upstream terminal outcomes as the library publishes / stores them.
SUCCESS = "success"


@dataclass
class ResolveReport:
    satisfied: int = 0
    skipped: list[str] = field(default_factory=list)
    already: int = 0
    errors: int = 0

    def merge(self, other: ResolveReport) -> None:
        self.satisfied += other.satisfied
        self.skipped += other.skipped
        self.already += other.already
        self.errors += other.errors


def _flow_frozen(backend: Backend, flows: set[tuple[int, str]]) -> set[str]:
    """Flows whose members the cancel cascade owns (cancelled with policy cancel_all)."""
    order = sorted(flows)
    pipe = backend.client.pipeline(transaction=False)
    for n, f in order:
        pipe.hmget(FlowKeys(n, f).core, ["public_flow_state", "cancellation_policy"])
    out = set()
    for (_, f), (state, policy) in zip(order, pipe.execute() if order else [], strict=True):
        if text(state) == "cancelled" and text(policy) == "cancel_all":
            out.add(f)
    return out


def _resolve_edges(backend: Backend, items: list[tuple[str, str, str, str, str]], now: int,
                   report: ResolveReport) -> list[tuple[ExecutionId, str, str]]:
    """Resolve `(child, flow_id, edge_id, upstream, outcome)` items; returns the children skipped."""
    pipe = backend.client.pipeline(transaction=False)
    for child, *_ in items:
        pipe.hmget(ExecKeys(child).core, ["lane_id", "current_attempt_index"])
    refs = pipe.execute() if items else []
    calls, lanes = [], []
    for (child, flow, edge, up, outcome), ref in zip(items, refs, strict=True):
        lane, idx = (text(x) for x in ref)
        lanes.append(lane or "default")
        calls.append(F.resolve_dependency(ExecKeys(child), lane=lane or "default",
                                          attempt_index=int(idx) if idx.isdigit() else 0, edge_id=edge,
                                          upstream=up, outcome=outcome, now_ms=now, flow_id=flow))
    skipped: list[tuple[ExecutionId, str, str]] = []
    woken: dict[str, set[int]] = {}
    fired: set[int] = set()
    for (child, f, *_), reply, lane in zip(items, backend.call_many(calls), lanes, strict=True):
        if isinstance(reply, ScriptError):
            report.errors += 1
            log.warning("resolving an edge into %s failed: %s", child, reply)
        elif reply.fields[:1] == ["already_resolved"]:
            report.already += 1
        elif reply.fields[:1] == ["satisfied"]:
            report.satisfied += 1
            woken.setdefault(lane, set()).add(ExecutionId(child).partition_index)
        elif reply.fields[:2] == ["impossible", "child_skipped"]:
            report.skipped.append(child)
            skipped.append((ExecutionId(child), f, "skipped"))
        if not isinstance(reply, ScriptError) and reply.fields[:1] in (["satisfied"], ["impossible"]):
            fired.add(ExecutionId(child).partition_index)
    # Workers idle-poll with backoff; a satisfied edge may have made a child eligible, so say so now.
    wake.announce(backend, woken)
    # A group that fired with cancel_remaining queued its running siblings: cancel them now, not a tick later.
    sibling_cancel.dispatch(backend, sorted(fired))
    return skipped


def resolve_outgoing(backend: Backend, finished: Iterable[tuple[str, str, str]],
                     now_ms: int | None = None, report: ResolveReport | None = None) -> ResolveReport:
    """Resolve the outgoing edges of finished members `(eid, flow_id, outcome)`, cascading skips."""
    report = report or ResolveReport()
    level = [(ExecutionId(e), f, o) for e, f, o in finished if f]
    while level:
        frozen = _flow_frozen(backend, {(e.partition_index, f) for e, f, _ in level})
        level = [(e, f, o) for e, f, o in level if f not in frozen]
        if not level:
            break
        now = backend.now_ms() if now_ms is None else now_ms
        # Outgoing edge ids of every finished member, then each edge's child.
        pipe = backend.client.pipeline(transaction=False)
        for e, f, _ in level:
            pipe.smembers(FlowKeys(e.partition_index, f).outgoing(e))
        out_edges = [(e, f, o, text(x)) for (e, f, o), s in zip(level, pipe.execute(), strict=True) for x in s]
        if not out_edges:
            break
        pipe = backend.client.pipeline(transaction=False)
        for e, f, _, edge in out_edges:
            pipe.hget(FlowKeys(e.partition_index, f).edge(edge), "downstream_execution_id")
        items = [(text(c), f, edge, str(e), o) for (e, f, o, edge), c in zip(out_edges, pipe.execute(), strict=True)
                 if c]
        level = _resolve_edges(backend, items, now, report)
    return report


def resolve_parked(backend: Backend, eids: list[str], now_ms: int | None = None,
                   per_execution: int = 20) -> ResolveReport:
    """Resolve the unresolved inbound edges of parked `eids` whose upstream already finished.

    The dependency reconciler's pass: covers lost completion messages and the expiry paths, which are
    never published. A replayed member is not skipped again for an upstream failure older than its
    replay: it waits for that upstream to be replayed (or for a new outcome).
    """
    report = ResolveReport()
    pipe = backend.client.pipeline(transaction=False)
    for e in eids:
        pipe.srandmember(ExecKeys(e).deps_unresolved, per_execution)
        pipe.hmget(ExecKeys(e).core, ["pending_replay_attempt", "last_transition_at"])
    raw = pipe.execute() if eids else []
    pairs = [(e, text(x)) for i, e in enumerate(eids) for x in raw[2 * i]]
    replayed_at = {e: int(text(raw[2 * i + 1][1]) or 0) for i, e in enumerate(eids)
                   if text(raw[2 * i + 1][0]) == "1"}
    if not pairs:
        return report
    pipe = backend.client.pipeline(transaction=False)
    for e, edge in pairs:
        pipe.hmget(ExecKeys(e).dep_edge(edge), ["upstream_execution_id", "flow_id"])
    ups = [(text(u), text(f)) for u, f in pipe.execute()]
    distinct = sorted({u for u, _ in ups if u})
    pipe = backend.client.pipeline(transaction=False)
    for u in distinct:
        pipe.hmget(ExecKeys(u).core, ["lifecycle_phase", "terminal_outcome", "completed_at"])
    done = {u: (text(o), int(text(at) or 0))
            for u, (phase, o, at) in zip(distinct, pipe.execute() if distinct else [], strict=True)
            if text(phase) == "terminal"}
    items = []
    for (child, edge), (up, f) in zip(pairs, ups, strict=True):
        if up not in done or not f:
            continue
        outcome, at = done[up]
        if outcome != SUCCESS and child in replayed_at and at <= replayed_at[child]:
            continue
        items.append((child, f, edge, up, outcome))
    frozen = _flow_frozen(backend, {(ExecutionId(c).partition_index, f) for c, f, *_ in items})
    items = [it for it in items if it[1] not in frozen]
    if not items:
        return report
    now = backend.now_ms() if now_ms is None else now_ms
    skipped = _resolve_edges(backend, items, now, report)
    return resolve_outgoing(backend, [(str(e), f, o) for e, f, o in skipped], now_ms, report)
