"""Scanners: dependency reconciler, cancel-flow backlog, flow projector — plus the completion listener.

- dependency_reconciler: the safety net under the completion listener. For executions parked in a lane's
  `blocked:dependencies` set it reads each unresolved edge's upstream; a finished upstream resolves the
  edge (covers lost Pub/Sub messages and the expire paths, which never publish). A parked execution
  with nothing unresolved is promoted.
- cancel_reconciler: finishes overdue cancel backlogs (a dispatcher died or gave up), ≤ 500 members
  per flow per pass.
- edge_cancel_dispatcher: cancels the siblings an any_of / quorum group with cancel_remaining queued when it
  fired (the resolver already does this inline; this catches what it could not), then drains the group.
- edge_cancel_reconciler: the crash net under it — clears stale queued groups and finishes drains whose
  cancels all landed (`ff_reconcile_sibling_cancel_group`); it leaves a group with a sibling running alone.
- flow_projector: back-fills our newest-first flow index for flows created elsewhere, prunes entries
  whose flow is gone, and writes `F:summary` (upstream's `members_<state>`, `total_members`, `sampled_members`, derived
  `public_flow_state`, `last_summary_update_at`) for big flows.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from ffcore import functions as F
from ffcore import keys
from ffcore.flows import sibling_cancel
from ffcore.flows.cancel import DEFAULT_GRACE_MS, drain_flow
from ffcore.flows.dag import resolve_parked
from ffcore.flows.reads import STATE_ORDER, SUMMARY_PREFIX, derived_state, member_counts

from ..backend import Backend
from ..errors import ConfigError, ScriptError
from ..keys import ExecKeys, FlowKeys, PartitionKeys
from ..reads import text
from .base import Scanner
from .dag_listener import CompletionListener
from .lanes import LaneScanner

#: Unresolved edges examined per parked execution per pass (server.md #12).
EDGES_PER_EXECUTION = 20
#: Members cancelled per flow per reconciler pass.
CANCELS_PER_FLOW = 500


@dataclass
class DependencyReconciler(LaneScanner):
    name: str = "dependency_reconciler"

    def scan_partition(self, n: int, now_ms: int) -> int:
        parked = self.heads(n, lambda lk: lk.blocked_dependencies)
        if not parked:
            return 0
        pipe = self.backend.client.pipeline(transaction=False)
        for _, e in parked:
            pipe.scard(ExecKeys(e).deps_unresolved)
        sizes = pipe.execute()
        # Nothing left unresolved yet still parked (e.g. a promotion lost to a crash): promote it.
        promote = [F.promote_blocked_to_eligible(ExecKeys(e), lane=lane, now_ms=now_ms)
                   for (lane, e), size in zip(parked, sizes, strict=True) if not size]
        acted = sum(1 for r in self.backend.call_many(promote) if not isinstance(r, ScriptError))
        waiting = [e for (_, e), size in zip(parked, sizes, strict=True) if size]
        rep = resolve_parked(self.backend, waiting, now_ms, EDGES_PER_EXECUTION)
        return acted + rep.satisfied + len(rep.skipped)


@dataclass
class CancelReconciler(Scanner):
    name: str = "cancel_reconciler"
    grace_ms: int = DEFAULT_GRACE_MS

    def scan_partition(self, n: int, now_ms: int) -> int:
        due = self.backend.client.zrangebyscore(keys.cancel_backlog(n), "-inf", now_ms, start=0, num=self.batch,
                                                withscores=True)
        if not due:
            return 0
        self.stats.last_lag_ms = max(self.stats.last_lag_ms, now_ms - int(due[0][1]))
        acted = 0
        for flow_id, _ in due:
            rep = drain_flow(self.backend, n, text(flow_id), limit=CANCELS_PER_FLOW, grace_ms=self.grace_ms)
            acted += len(rep.cancelled)
        return acted


@dataclass
class EdgeCancelDispatcher(Scanner):
    name: str = "edge_cancel_dispatcher"

    def scan_partition(self, n: int, now_ms: int) -> int:
        rep = sibling_cancel.dispatch(self.backend, [n], self.batch)
        return len(rep.cancelled) + rep.drained


@dataclass
class EdgeCancelReconciler(Scanner):
    name: str = "edge_cancel_reconciler"

    def scan_partition(self, n: int, now_ms: int) -> int:
        return sibling_cancel.reconcile(self.backend, n, self.batch)


@dataclass
class FlowProjector(Scanner):
    name: str = "flow_projector"
    #: Flows smaller than this are counted live by the pages; only bigger ones need a summary.
    summary_min_members: int = 0
    _cursors: dict[int, int] = field(default_factory=dict)

    def scan_partition(self, n: int, now_ms: int) -> int:
        ix = PartitionKeys(n)
        cursor, found = self.backend.client.sscan(ix.flow_index, self._cursors.get(n, 0), count=self.batch)
        self._cursors[n] = int(cursor)
        flows = sorted(text(f) for f in found)
        if not flows:
            return 0
        pipe = self.backend.client.pipeline(transaction=False)
        for f in flows:
            pipe.hmget(FlowKeys(n, f).core, ["created_at", "node_count", "public_flow_state"])
        cores = pipe.execute()
        pipe = self.backend.client.pipeline(transaction=False)
        live = []
        for f, (created, nodes, state) in zip(flows, cores, strict=True):
            if created is None:  # the flow is gone (retention): drop its index entries
                pipe.srem(ix.flow_index, f)
                pipe.zrem(keys.flows_created(n), f)
                continue
            pipe.zadd(keys.flows_created(n), {f: int(text(created) or 0)}, nx=True)
            if int(text(nodes) or 0) >= self.summary_min_members:
                live.append((f, text(state)))
        counts = member_counts(self.backend, [f for f, _ in live])
        for f, state in live:
            c = counts[f]
            total = sum(c.values())
            # Upstream's field names (valkey-layout #61), so an upstream reader and ours agree; every member is
            # counted, so sampled_members == total_members.
            summary = {SUMMARY_PREFIX + s: c.get(s, 0) for s in STATE_ORDER}
            pipe.hset(FlowKeys(n, f).summary, mapping={**summary, "total_members": total, "sampled_members": total,
                                                       "public_flow_state": derived_state(state, c),
                                                       "last_summary_update_at": now_ms})
        pipe.execute()
        return len(live)


def _interval(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or int(raw) < 10:
        raise ConfigError(f"{name}={raw!r} must be a whole number of milliseconds >= 10")
    return int(raw)


def scanners(backend: Backend) -> list[Scanner]:
    """The scanners of this area, configured from backend.settings (batch) and FF_SCAN_* intervals."""
    env, batch = os.environ, backend.settings.scanners.batch
    return [
        CompletionListener(backend, interval_ms=1000),
        DependencyReconciler(backend, interval_ms=_interval(env, "FF_SCAN_DEPENDENCY_MS", 5000), batch=batch),
        CancelReconciler(backend, interval_ms=_interval(env, "FF_SCAN_CANCEL_BACKLOG_MS", 15000), batch=batch),
        EdgeCancelDispatcher(backend, interval_ms=_interval(env, "FF_SCAN_EDGE_CANCEL_MS", 1000), batch=batch),
        EdgeCancelReconciler(backend, interval_ms=_interval(env, "FF_SCAN_EDGE_CANCEL_RECONCILE_MS", 15000),
                             batch=batch),
        FlowProjector(backend, interval_ms=_interval(env, "FF_SCAN_FLOW_PROJECTOR_MS", 15000), batch=batch,
                      summary_min_members=0),
    ]
