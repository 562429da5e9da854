"""Flows (DAGs): create a flow, add members and dependency edges.

Members are minted on the flow's partition, so a flow and all its members share one hash slot. That
lets `build()` create members, add them, stage their edges and apply each edge to its child inside one
MULTI/EXEC guarded by WATCH on the flow core: no child is ever claimable before its inbound edges are
applied, and the expected graph revision of every staged edge is known in advance (a concurrent
mutation aborts the EXEC and the batch is retried with the new revision).

    flows = Flows(backend)
    fid = flows.create(kind="etl")
    a, b, c = flows.build(fid, [{"kind": "extract"}, {"kind": "transform"}, {"kind": "load"}],
                          edges=[(0, 1), (1, 2)])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import redis

from ffcore import events, keys, wake
from ffcore import functions as F
from ffcore.backend import Backend
from ffcore.errors import ERRORS, FFError, InvalidInput, ScriptError
from ffcore.execution import filter_index
from ffcore.execution.client import Client
from ffcore.flows import edge_groups
from ffcore.flows import plan as flow_plan
from ffcore.flows.cancel import CANCEL_ALL, CancelOutcome, cancel_flow
from ffcore.flows.dag import resolve_parked
from ffcore.flows.reads import FlowGraph, FlowPage, list_flows, member_counts, read_flow
from ffcore.flows.tags import set_flow_tags
from ffcore.ids import ExecutionId, new_uuid, parse_edge_id, parse_flow_id
from ffcore.keys import ExecKeys, FlowKeys, PartitionKeys
from ffcore.partition import flow_partition
from ffcore.reads import core_refs, text

FlowNotFound = ERRORS["flow_not_found"]
#: Members plus edges per MULTI/EXEC; bigger graphs go in several batches (edges after their members).
MAX_BATCH = 2000
#: WATCH conflicts tolerated before giving up (each one means another writer changed the flow).
MAX_WATCH_RETRIES = 20

#: An edge end: an index into the `members` being added, or the id of an existing member.
Ref = int | str


class PartitionMismatch(FFError, ValueError):
    """An execution from another partition cannot join a flow (its keys live in another slot)."""


@dataclass(frozen=True)
class EdgeSpec:
    upstream: Ref
    downstream: Ref
    kind: str = F.SUCCESS_ONLY
    data_passing_ref: str = ""
    edge_id: str | None = None


def _edge(e: EdgeSpec | tuple[Ref, Ref]) -> EdgeSpec:
    return e if isinstance(e, EdgeSpec) else EdgeSpec(e[0], e[1])


class Flows:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.client = Client(backend)

    def partition(self, flow_id: str) -> int:
        return flow_partition(parse_flow_id(flow_id), self.backend.settings.partitions.flow)

    def keys(self, flow_id: str) -> FlowKeys:
        return FlowKeys(self.partition(flow_id), flow_id)

    # ------------------------------------------------------------ flows
    def create(self, *, kind: str = "dag", namespace: str = "default", flow_id: str | None = None) -> str:
        """Create a flow (idempotent on `flow_id`); returns its id."""
        fid = parse_flow_id(flow_id) if flow_id else new_uuid()
        n = self.partition(fid)
        reply = self.backend.call(F.create_flow(n, fid, kind=kind, namespace=namespace))
        if reply.status == "OK":
            created = self.backend.client.hget(FlowKeys(n, fid).core, "created_at")
            # Our newest-first listing index (the flow projector back-fills flows created elsewhere).
            self.backend.client.zadd(keys.flows_created(n), {fid: int(text(created) or 0)}, nx=True)
        return fid

    def mint(self, flow_id: str) -> ExecutionId:
        """A fresh execution id on the flow's partition (what a member must be created with)."""
        return ExecutionId.mint(self.partition(flow_id))

    def check_partition(self, flow_id: str, eid: str) -> ExecutionId:
        e = ExecutionId(eid)
        n = self.partition(flow_id)
        if e.partition_index != n:
            raise PartitionMismatch(
                f"execution {e} lives on partition {e.partition_index} but flow {flow_id} on {n}: a flow member "
                f"must be created with an id minted for the flow (Flows.mint / Flows.add_member)")
        return e

    # ------------------------------------------------------------ reads, replay, cancel
    def get(self, flow_id: str) -> FlowGraph | None:
        """The whole flow (members with their public state, edges with their resolution state)."""
        return read_flow(self.backend, parse_flow_id(flow_id))

    def summary(self, flow_id: str) -> dict[str, int]:
        """Member counts by public state."""
        return member_counts(self.backend, [parse_flow_id(flow_id)])[flow_id]

    def page(self, *, cursor: str | None = None, limit: int = 50) -> FlowPage:
        return list_flows(self.backend, cursor=cursor, limit=limit)

    def cancel(self, flow_id: str, *, reason: str, policy: str = CANCEL_ALL, wait: bool = False,
               timeout_ms: int | None = None) -> CancelOutcome:
        """Cancel the flow; with `cancel_all` its unfinished members are cancelled (in the background
        unless `wait`, for at most `timeout_ms` when given), durably: a dispatcher that dies is finished by the
        cancel reconciler. See `ffcore.flows.cancel.CancelOutcome` for the statuses."""
        fid = parse_flow_id(flow_id)
        out = cancel_flow(self.backend, fid, reason=reason, policy=policy, wait=wait, timeout_ms=timeout_ms)
        events.publish(self.backend, ids=out.members, flows=[fid])
        return out

    def set_edge_group_policy(self, flow_id: str, eid: str, policy: Any) -> str:
        """Set member `eid`'s inbound edge-group policy before its first edge ("set" / "already_set")."""
        return edge_groups.set_edge_group_policy(self.backend, flow_id, eid, policy)

    def set_tags(self, flow_id: str, tags: dict[str, str]) -> int:
        """Add or overwrite `<caller>.<field>` tags of the flow (operations §8.5); returns the pair count."""
        return set_flow_tags(self.backend, flow_id, tags)

    def replay(self, eid: str) -> F.Reply:
        """Replay a member. A skipped one re-blocks on its inbound edges; edges whose upstream has since
        succeeded resolve at once (no completion message will come for them)."""
        reply = self.client.replay(eid)
        resolve_parked(self.backend, [eid])
        return reply

    # ------------------------------------------------------------ members and edges
    def add_member(self, flow_id: str, **create: Any) -> ExecutionId:
        """Create one execution on the flow's partition and add it to the flow atomically."""
        return self.build(flow_id, [create])[0]

    def add_execution(self, flow_id: str, eid: str) -> int:
        """Add an existing execution (minted on the flow's partition); returns the flow's node count."""
        return self.attach(flow_id, eid)[1]

    def attach(self, flow_id: str, eid: str) -> tuple[bool, int]:
        """Add an existing execution to the flow: (added now, node count); (False, n) if already a member."""
        e = self.check_partition(flow_id, eid)
        reply = self.backend.call(F.add_execution_to_flow(e.partition_index, flow_id, ExecKeys(e)))
        events.publish(self.backend, ids=[e], flows=[flow_id])
        return reply.status != "ALREADY_SATISFIED", int(reply[1] or 0)

    def stage_edge(self, flow_id: str, *, edge_id: str, upstream: str, downstream: str, expected_revision: int,
                   kind: str = F.SUCCESS_ONLY, data_passing_ref: str = "", now_ms: int | None = None) -> int:
        """Upstream's first step: record the edge on the flow if its graph is still at `expected_revision`
        (`stale_graph_revision` otherwise); returns the new revision. `apply_edge` is the second step."""
        reply = self.backend.call(F.stage_dependency_edge(
            self.keys(flow_id), edge_id=edge_id, upstream=upstream, downstream=downstream,
            expected_revision=expected_revision, now_ms=self.backend.now_ms() if now_ms is None else now_ms,
            kind=kind, data_passing_ref=data_passing_ref))
        events.publish(self.backend, flows=[flow_id])
        return int(reply[1] or 0)

    def apply_edge(self, flow_id: str, *, edge_id: str, upstream: str, downstream: str, graph_revision: int,
                   kind: str = F.SUCCESS_ONLY, data_passing_ref: str = "", now_ms: int | None = None) -> int | None:
        """Apply a staged edge to its child: the child's unsatisfied count, or None when already applied."""
        child = ExecKeys(downstream)
        reply = self.backend.call(F.apply_dependency_to_child(
            child, lane=core_refs(self.backend, child).lane or "default", flow_id=flow_id, edge_id=edge_id,
            upstream=upstream, graph_revision=graph_revision,
            now_ms=self.backend.now_ms() if now_ms is None else now_ms, kind=kind, data_passing_ref=data_passing_ref))
        if reply.status == "ALREADY_APPLIED" or reply[0] == "already_applied":
            return None
        # An upstream that already finished sends no completion message: resolve the new edge now.
        resolve_parked(self.backend, [child.eid])
        events.publish(self.backend, ids=[child.eid], flows=[flow_id])
        return int(reply[0] or 0)

    def add_edge(self, flow_id: str, upstream: str, downstream: str, *, kind: str = F.SUCCESS_ONLY,
                 data_passing_ref: str = "", edge_id: str | None = None) -> str:
        """Stage a dependency edge between two members and apply it to the child (one MULTI/EXEC)."""
        spec = EdgeSpec(upstream, downstream, kind, data_passing_ref, edge_id or new_uuid())
        self.build(flow_id, [], [spec])
        return spec.edge_id or ""

    def build(self, flow_id: str, members: Sequence[dict[str, Any]] = (),
              edges: Sequence[EdgeSpec | tuple[Ref, Ref]] = (),
              groups: Mapping[Ref, Any] | None = None) -> list[ExecutionId]:
        """Create `members` (Client.create keyword dicts) in the flow and stage + apply `edges`.

        Edge ends are indexes into `members` or ids of existing members. Returns the new member ids.
        `groups` gives members (same references) an inbound edge-group policy (`edge_groups.check_policy`,
        e.g. `{"kind": "quorum", "k": 2, "on_satisfied": "cancel_remaining"}`), set ahead of their first edge.
        Raises the typed engine error of the first refused call (e.g. CycleDetected).
        """
        n = self.partition(flow_id)
        specs = [_edge(e) for e in edges]
        eids = [ExecutionId.mint(n) for _ in members]
        ends = self._resolve_refs(flow_id, eids, specs)
        policies = {self._ref(flow_id, eids, r): edge_groups.check_policy(p) for r, p in (groups or {}).items()}
        lanes = self._lanes(members, eids, ends)
        now = self.backend.now_ms()
        creates = []
        for m, eid in zip(members, eids, strict=True):
            spec = dict(m)
            if spec.get("delay_until") is not None and spec["delay_until"] <= now:
                spec["delay_until"] = None  # a lapsed delay must not land in L:delayed (see Client.create_many)
            creates.append(F.as_fast_create(self.client.create_call(**spec, execution_id=eid)))
        if creates:
            self.backend.client.sadd(keys.LANES_INDEX, *{str(c.args[2]) for c in creates})
        self._precheck(n, flow_id, [str(e) for e in eids], specs, ends)
        edge_groups.precheck_unfixed(self.backend, FlowKeys(n, flow_id), sorted(set(policies) - {str(e) for e in eids}))
        by_eid = {str(c.args[0]): c for c in creates}
        for batch_members, edge_idx in flow_plan.batches([str(e) for e in eids], ends, MAX_BATCH):
            self._transact(n, flow_id, [by_eid[m] for m in batch_members],
                           [(specs[i], *ends[i]) for i in edge_idx], lanes, now, policies)
        for down, p in sorted(policies.items()):  # members given a policy but no edge in this build
            edge_groups.set_edge_group_policy(self.backend, flow_id, down, p)
        return eids

    def _precheck(self, n: int, flow_id: str, new: list[str], specs: list[EdgeSpec],
                  ends: list[tuple[str, str]]) -> None:
        """Refuse what the library would refuse mid-transaction (see flow_plan): nothing is written."""
        fk = FlowKeys(n, flow_id)
        fresh = set(new)
        old_ends = sorted({x for pair in ends for x in pair if x not in fresh})
        pipe = self.backend.client.pipeline(transaction=False)
        for e in old_ends:
            pipe.sismember(fk.members, e)
        given = [s.edge_id for s in specs if s.edge_id]
        for e in given:
            pipe.exists(fk.edge(e))
        raw = pipe.execute() if old_ends or given else []
        for e, ok in zip(old_ends, raw, strict=False):
            if not ok:
                raise ERRORS["execution_not_in_flow"]("execution_not_in_flow", [e], "ff_stage_dependency_edge")
        if any(raw[len(old_ends):]) or len(set(given)) != len(given):
            raise ERRORS["dependency_already_exists"]("dependency_already_exists", [], "ff_stage_dependency_edge")
        # Only an edge into an existing member can close a cycle through existing edges.
        existing: list[tuple[str, str]] = []
        if any(down not in fresh for _, down in ends):
            g = read_flow(self.backend, flow_id)
            existing = [(e.upstream, e.downstream) for e in g.edges] if g else []
        flow_plan.check_acyclic(existing, ends)

    def _ref(self, flow_id: str, eids: list[ExecutionId], ref: Ref) -> str:
        if isinstance(ref, int):
            if not 0 <= ref < len(eids):
                raise InvalidInput("invalid_input", [f"edge end {ref} is not an index of the new members"])
            return str(eids[ref])
        return str(self.check_partition(flow_id, ref))

    def _resolve_refs(self, flow_id: str, eids: list[ExecutionId], specs: list[EdgeSpec]) -> list[tuple[str, str]]:
        out = []
        for s in specs:
            pair = [self._ref(flow_id, eids, ref) for ref in (s.upstream, s.downstream)]
            if pair[0] == pair[1]:
                raise ERRORS["self_referencing_edge"]("self_referencing_edge", [pair[0]], "ff_stage_dependency_edge")
            if s.edge_id:
                parse_edge_id(s.edge_id)
            out.append((pair[0], pair[1]))
        return out

    def _lanes(self, members: Sequence[dict[str, Any]], eids: list[ExecutionId],
               ends: list[tuple[str, str]]) -> dict[str, str]:
        """Lane of every edge's child (needed to name its lane indexes): new members from their spec."""
        lanes = {str(e): str(m.get("lane") or "default") for m, e in zip(members, eids, strict=True)}
        existing = sorted({down for _, down in ends if down not in lanes})
        if existing:
            pipe = self.backend.client.pipeline(transaction=False)
            for e in existing:
                pipe.hget(ExecKeys(e).core, "lane_id")
            for e, lane in zip(existing, pipe.execute(), strict=True):
                lanes[e] = text(lane) or "default"
        return lanes

    def _transact(self, n: int, flow_id: str, creates: list[F.Call], edges: list[tuple[EdgeSpec, str, str]],
                  lanes: dict[str, str], now: int, policies: dict[str, dict[str, Any]] | None = None) -> None:
        """One MULTI/EXEC; a policy of `policies` is set ahead of its member's first edge (and then removed)."""
        fk = FlowKeys(n, flow_id)
        policies = {} if policies is None else policies
        created_ix = PartitionKeys(n).created
        for _ in range(MAX_WATCH_RETRIES):
            calls: list[F.Call] = []
            with self.backend.client.pipeline(transaction=True) as pipe:
                try:
                    pipe.watch(fk.core)
                    state, rev_raw = pipe.hmget(fk.core, ["public_flow_state", "graph_revision"])
                    if state is None:
                        raise FlowNotFound("flow_not_found", [flow_id], "ff_add_execution_to_flow")
                    rev = int(text(rev_raw) or 0)
                    for c in creates:
                        eid = ExecKeys(str(c.args[0]))
                        calls += [c, F.add_execution_to_flow(n, flow_id, eid)]
                        rev += 1
                    fixed: set[str] = set()
                    for spec, up, down in edges:
                        eid_ = spec.edge_id or new_uuid()
                        if down in policies and down not in fixed:
                            p = policies[down]
                            fixed.add(down)
                            calls.append(F.set_edge_group_policy(fk, down, variant=p["kind"],
                                                                 on_satisfied=p.get("on_satisfied", ""),
                                                                 k=p.get("k", 0), now_ms=now))
                        calls.append(F.stage_dependency_edge(
                            fk, edge_id=eid_, upstream=up, downstream=down, expected_revision=rev, now_ms=now,
                            kind=spec.kind, data_passing_ref=spec.data_passing_ref))
                        rev += 1
                        calls.append(F.apply_dependency_to_child(
                            ExecKeys(down), lane=lanes.get(down, "default"), flow_id=flow_id, edge_id=eid_,
                            upstream=up, graph_revision=rev, now_ms=now, kind=spec.kind,
                            data_passing_ref=spec.data_passing_ref))
                    pipe.multi()
                    for c in calls:
                        pipe.fcall(c.function, len(c.keys), *c.keys, *c.args)
                    for c in creates:
                        pipe.zadd(created_ix, {str(c.args[0]): now})
                        filter_index.add(pipe, str(c.args[0]), now, str(c.args[3]), filter_index.create_tags(c))
                    raw = pipe.execute(raise_on_error=False)
                except redis.WatchError:
                    continue
            self._check(calls, raw)
            for down in fixed:
                policies.pop(down, None)
            if creates:  # listing fan-out registry (global keys: outside the single-slot transaction)
                reg = self.backend.client.pipeline(transaction=False)
                new_lanes = {str(c.args[2]) for c in creates}
                for lane in new_lanes:
                    reg.sadd(keys.lane_partitions(lane), n)
                # Roots are eligible now: wake idle workers (a hint; for blocked members it costs one probe).
                wake.announce(self.backend, {lane: [n] for lane in new_lanes}, reg)
                reg.execute()
            return
        raise FFError(f"flow {flow_id} kept changing under us ({MAX_WATCH_RETRIES} WATCH conflicts); try again")

    def _check(self, calls: list[F.Call], raw: list[Any]) -> None:
        for c, r in zip(calls, raw, strict=False):
            if isinstance(r, Exception):
                raise ScriptError("raised", [str(r)], c.function)
            c.parse(c.function, r)  # raises the typed error of a refused call
