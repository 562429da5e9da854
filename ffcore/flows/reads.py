"""Reading flows: a whole DAG in three round trips, member counts by state, the newest-first flow list.

Round trips of `read_flow`: (1) flow core + member set, (2) each member's core fields and inbound edge
ids, (3) each inbound edge's child-local record (ends, kind and resolution state; a fourth trip reads
the flow's edge record only for edges staged but not yet applied to their child). `read_members`
stops after a lighter (2), for views of big flows that read edges only around some members
(`flow_topology`).

The typed reads of the spec (operations §12.9-12.12) are at the end: `describe_flow` (with its edge
groups), `describe_edge`, `list_edges` by direction.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

from ffcore.backend import Backend
from ffcore.errors import FFError, InvalidInput
from ffcore.execution.listing import merge_desc, parse_cursor
from ffcore.flows.tags import read_flow_tags
from ffcore.ids import ExecutionId, parse_edge_id, parse_flow_id
from ffcore.keys import ExecKeys, FlowKeys
from ffcore.partition import flow_partition
from ffcore.reads import decode_map, text
from ffcore.upstream.reads import indexes

NODE_FIELDS = ("execution_kind", "public_state", "lane_id", "terminal_outcome", "blocking_reason", "created_at",
               "completed_at", "total_attempt_count", "replay_count")
#: Public states counted as finished.
TERMINAL_STATES = frozenset({"completed", "failed", "cancelled", "expired", "skipped"})
#: Order the dashboard shows counts in.
STATE_ORDER = ("waiting", "delayed", "rate_limited", "waiting_children", "active", "suspended", "completed",
               "failed", "cancelled", "expired", "skipped")
#: F:summary holds one `members_<state>` count per state (upstream's field names).
SUMMARY_PREFIX = "members_"


@dataclass(frozen=True)
class Node:
    eid: str
    fields: dict[str, str]

    @property
    def state(self) -> str:
        return self.fields.get("public_state", "") or "unknown"

    @property
    def kind(self) -> str:
        return self.fields.get("execution_kind", "")


@dataclass(frozen=True)
class Edge:
    edge_id: str
    upstream: str
    downstream: str
    kind: str
    #: The child-local resolution state: unsatisfied / satisfied / impossible ("" until applied).
    state: str
    data_passing_ref: str = ""


@dataclass
class FlowMembers:
    """A flow's core and every member with some core fields (no edges)."""

    flow_id: str
    core: dict[str, str]
    nodes: list[Node]
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def revision(self) -> str:
        return self.core.get("graph_revision", "0")

    @property
    def state(self) -> str:
        """Stored state when cancelled, else derived from the members (as the flow projector does)."""
        return derived_state(self.core.get("public_flow_state", ""), self.counts)

    @property
    def edge_count(self) -> int:
        return int(self.core.get("edge_count") or 0)


@dataclass
class FlowGraph(FlowMembers):
    """The whole flow: members and every edge."""

    edges: list[Edge] = field(default_factory=list)
    #: downstream eid -> its edge-group record (v0.13; absent for a child whose edges predate the records).
    groups: dict[str, dict[str, str]] = field(default_factory=dict)
    #: downstream eid -> the siblings its cancel_remaining group cancelled (ours).
    cancelled_siblings: dict[str, list[str]] = field(default_factory=dict)


def derived_state(stored: str, counts: dict[str, int]) -> str:
    if stored in ("cancelled", "completed", "failed"):
        return stored
    total = sum(counts.values())
    if total and all(s in TERMINAL_STATES for s in counts):
        return "failed" if counts.get("failed") or counts.get("cancelled") or counts.get("expired") else "completed"
    if counts.get("active"):
        return "running"
    if any(counts.get(s) for s in ("suspended", "delayed", "rate_limited", "waiting_children")):
        return "blocked"
    return stored or "open"


def partition_of(backend: Backend, flow_id: str) -> int:
    return flow_partition(parse_flow_id(flow_id), backend.settings.partitions.flow)


def flow_keys(backend: Backend, flow_id: str) -> FlowKeys:
    return FlowKeys(partition_of(backend, flow_id), flow_id)


def read_head(backend: Backend, flow_id: str) -> tuple[FlowKeys, dict[str, str], list[str]] | None:
    """(keys, flow core, member ids sorted) in one round trip; None when the flow does not exist."""
    fk = flow_keys(backend, flow_id)
    pipe = backend.client.pipeline(transaction=False)
    pipe.hgetall(fk.core)
    pipe.smembers(fk.members)
    core_raw, members_raw = pipe.execute()
    if not core_raw:
        return None
    return fk, decode_map(core_raw), sorted(text(m) for m in members_raw)


#: Member fields `read_members` reads (what a view of a big flow shows per member).
MEMBER_FIELDS = ("execution_kind", "public_state")


def read_members(backend: Backend, flow_id: str, fields: tuple[str, ...] = MEMBER_FIELDS,
                 head: tuple[FlowKeys, dict[str, str], list[str]] | None = None) -> FlowMembers | None:
    """The flow core and every member's `fields` in two round trips (one when `head` is given)."""
    head = head or read_head(backend, flow_id)
    if head is None:
        return None
    _, core, members = head
    raw = backend.read_many([("HMGET", ExecKeys(m).core, *fields) for m in members])
    nodes = [Node(m, dict(zip(fields, map(text, vals), strict=True))) for m, vals in zip(members, raw, strict=True)]
    return FlowMembers(flow_id, core, nodes, dict(Counter(n.state for n in nodes)))


def read_flow(backend: Backend, flow_id: str,
              head: tuple[FlowKeys, dict[str, str], list[str]] | None = None) -> FlowGraph | None:
    """The whole flow: core, every member with its public state, every edge with its resolution state."""
    head = head or read_head(backend, flow_id)
    if head is None:
        return None
    fk, core, members = head
    raw = backend.read_many([c for m in members
                             for c in (("HMGET", ExecKeys(m).core, *NODE_FIELDS), ("SMEMBERS", fk.incoming(m)),
                                       ("HGETALL", fk.edgegroup(m)), ("SMEMBERS", fk.edgegroup_cancelled(m)))])
    nodes: list[Node] = []
    inbound: list[tuple[str, str]] = []  # (edge id, downstream)
    groups: dict[str, dict[str, str]] = {}
    cancelled: dict[str, list[str]] = {}
    for i, m in enumerate(members):
        node_raw, in_raw, group_raw, cancelled_raw = raw[4 * i:4 * i + 4]
        nodes.append(Node(m, dict(zip(NODE_FIELDS, map(text, node_raw), strict=True))))
        inbound += [(text(e), m) for e in sorted(in_raw)]
        if group_raw:
            groups[m] = _pairs(group_raw)
        if cancelled_raw:
            cancelled[m] = sorted(text(x) for x in cancelled_raw)
    # The child's copy of an edge carries its ends, kind and resolution state in one hash.
    raw = backend.read_many([("HMGET", ExecKeys(down).dep_edge(e), *_DEP_FIELDS) for e, down in inbound])
    recs = [list(map(text, r)) for r in raw]
    unapplied = [i for i, r in enumerate(raw) if all(v is None for v in r)]
    if unapplied:  # staged on the flow, not yet applied to the child: the flow's record, no state yet
        staged = backend.read_many([("HMGET", fk.edge(inbound[i][0]), *_DEP_FIELDS[:3]) for i in unapplied])
        for i, r in zip(unapplied, staged, strict=True):
            recs[i] = [*map(text, r), ""]
    edges = [Edge(e, up, down, kind, state, ref)
             for (e, down), (up, kind, ref, state) in zip(inbound, recs, strict=True)]
    return FlowGraph(flow_id, core, nodes, dict(Counter(n.state for n in nodes)), edges, groups, cancelled)


def _pairs(raw: object) -> dict[str, str]:
    """HGETALL as str -> str, whether the client answered a dict or a flat list."""
    if isinstance(raw, dict):
        return {text(k): text(v) for k, v in raw.items()}
    items = list(raw) if isinstance(raw, (list, tuple)) else []
    return {text(items[i]): text(items[i + 1]) for i in range(0, len(items) - 1, 2)}


_DEP_FIELDS = ("upstream_execution_id", "dependency_kind", "data_passing_ref", "state")


def member_counts(backend: Backend, flow_ids: list[str]) -> dict[str, dict[str, int]]:
    """{flow: {public state: members}} for several flows in two round trips."""
    fks = [flow_keys(backend, f) for f in flow_ids]
    member_sets = [sorted(text(m) for m in s) for s in backend.read_many([("SMEMBERS", fk.members) for fk in fks])]
    states = iter(backend.read_many([("HGET", ExecKeys(m).core, "public_state") for ms in member_sets for m in ms]))
    return {f: in_state_order(Counter(text(next(states)) or "unknown" for _ in ms))
            for f, ms in zip(flow_ids, member_sets, strict=True)}


def in_state_order(counts: Counter[str]) -> dict[str, int]:
    """Counts keyed in STATE_ORDER (unknown states last), so every row of the list reads the same way round."""
    known = {s: counts[s] for s in STATE_ORDER if counts.get(s)}
    return known | {s: n for s, n in counts.items() if s not in known}


@dataclass(frozen=True)
class FlowRow:
    flow_id: str
    core: dict[str, str]
    counts: dict[str, int]
    #: False for a big flow the projector has not summarised yet (no counts, the core's node count).
    counted: bool = True

    @property
    def state(self) -> str:
        return derived_state(self.core.get("public_flow_state", ""), self.counts)

    @property
    def total(self) -> int:
        return sum(self.counts.values()) if self.counted else int(self.core.get("node_count") or 0)


@dataclass
class FlowPage:
    rows: list[FlowRow]
    next_cursor: str | None


#: Flows bigger than this are counted from the projector's summary hash rather than member by member.
LIVE_COUNT_LIMIT = 2000
FLOW_FIELDS = ("flow_id", "flow_kind", "namespace", "graph_revision", "node_count", "edge_count",
               "public_flow_state", "created_at", "cancelled_at", "cancel_reason")


def list_flows(backend: Backend, *, cursor: str | None = None, limit: int = 50) -> FlowPage:
    """Flows newest first across every partition (k-way merge of the per-partition created indexes)."""
    if not 1 <= limit <= 500:
        raise InvalidInput("invalid_input", ["limit must be within 1..500"])
    p = backend.settings.partitions.flow
    index_keys = [indexes(backend).flows(n) for n in range(p)]
    cores: dict[str, dict[str, str]] = {}

    def accept(fids: list[str]) -> list[bool]:
        pipe = backend.client.pipeline(transaction=False)
        for f in fids:
            pipe.hmget(flow_keys(backend, f).core, FLOW_FIELDS)
        flags = []
        for f, vals in zip(fids, pipe.execute(), strict=True):
            row = dict(zip(FLOW_FIELDS, map(text, vals), strict=True))
            flags.append(bool(row["flow_id"]))  # pruned flows are skipped
            cores[f] = row
        return flags

    found, _examined, _more = merge_desc(backend, index_keys, parse_cursor(cursor), limit, accept)
    nxt = found.pop()
    small = [f for f in found if int(cores[f].get("node_count") or 0) <= LIVE_COUNT_LIMIT]
    counts = member_counts(backend, small)
    big = [f for f in found if f not in counts]
    uncounted = set()
    if big:
        pipe = backend.client.pipeline(transaction=False)
        for f in big:
            pipe.hgetall(flow_keys(backend, f).summary)
        for f, summ in zip(big, pipe.execute(), strict=True):
            s = decode_map(summ)
            if not s:  # not summarised yet (the projector runs every few seconds): never count it here
                uncounted.add(f)
            got = {st: s.get(SUMMARY_PREFIX + st, "") for st in STATE_ORDER}
            counts[f] = {st: int(v) for st, v in got.items() if v.isdigit() and int(v)}
    return FlowPage([FlowRow(f, cores[f], counts.get(f, {}), f not in uncounted) for f in found], nxt or None)


# ---------------------------------------------------------------- typed reads (operations §12.9, §12.11, §12.12)

EDGE_FIELDS = ("edge_id", "flow_id", "upstream_execution_id", "downstream_execution_id", "dependency_kind",
               "satisfaction_condition", "data_passing_ref", "edge_state", "created_at", "created_by")
DIRECTIONS = ("outgoing", "incoming")


class CorruptEdge(FFError):
    """An edge record whose stored flow id is not the flow it was read under."""


@dataclass(frozen=True)
class EdgeSnapshot:
    """The flow's immutable edge record as staged (`edge_state` is the staging literal, `pending`; the
    child-side resolution state is the edge group's business)."""

    edge_id: str
    flow_id: str
    upstream_execution_id: str
    downstream_execution_id: str
    dependency_kind: str
    satisfaction_condition: str
    data_passing_ref: str | None
    edge_state: str
    created_at: int
    created_by: str


GroupState = Literal["pending", "satisfied", "impossible", "cancelled"]


@dataclass(frozen=True)
class EdgeGroupSnapshot:
    """One downstream execution's inbound edges as a group, under its policy (`ffcore.flows.edge_groups`):
    `all_of` is satisfied when every edge is and impossible as soon as one is; `any_of` / `quorum` fire once,
    at k successes or when k can no longer be reached (the stored group_state)."""

    downstream_execution_id: str
    policy: dict[str, Any]
    total_deps: int
    satisfied_count: int
    #: Edges made impossible by an upstream that failed, was cancelled or expired.
    failed_count: int
    #: Edges made impossible by an upstream that was itself skipped.
    skipped_count: int
    #: Edges whose upstream has not finished yet.
    running_count: int
    group_state: GroupState
    #: Upstreams this group cancelled once it fired (on_satisfied cancel_remaining), by id.
    cancelled_siblings: list[str] = field(default_factory=list)
    #: Of `failed_count` (upstream's meaning, kept), the edges made impossible by that cancel: the group's own
    #: doing, not a failure (ours; the flow page says "cancelled by the group").
    sibling_cancelled_count: int = 0


def policy_of(record: dict[str, str]) -> dict[str, Any]:
    """The EdgeDependencyPolicy a stored edge-group record holds (no record / all_of → all_of)."""
    kind = record.get("policy_variant") or "all_of"
    if kind == "any_of":
        return {"kind": kind, "on_satisfied": record.get("on_satisfied", "")}
    if kind == "quorum":
        k = record.get("k", "")
        return {"kind": kind, "k": int(k) if k.isdigit() else 1, "on_satisfied": record.get("on_satisfied", "")}
    return {"kind": "all_of"}


@dataclass(frozen=True)
class FlowSnapshot:
    flow_id: str
    flow_kind: str
    namespace: str
    public_flow_state: str
    graph_revision: int
    node_count: int
    edge_count: int
    created_at: int
    last_mutation_at: int
    cancelled_at: int | None
    cancel_reason: str | None
    cancellation_policy: str | None
    tags: dict[str, str]
    edge_groups: list[EdgeGroupSnapshot]


def _int(v: str) -> int:
    return int(v) if v.isdigit() else 0


def _edge(fid: str, raw: list[object]) -> EdgeSnapshot | None:
    e = dict(zip(EDGE_FIELDS, map(text, raw), strict=True))
    if not e["edge_id"]:
        return None
    if e["flow_id"] != fid:
        raise CorruptEdge(f"edge {e['edge_id']} is stored under flow {fid} but names flow {e['flow_id']}")
    return EdgeSnapshot(e["edge_id"], fid, e["upstream_execution_id"], e["downstream_execution_id"],
                        e["dependency_kind"], e["satisfaction_condition"], e["data_passing_ref"] or None,
                        e["edge_state"], _int(e["created_at"]), e["created_by"])


def describe_edge(backend: Backend, flow_id: str, edge_id: str) -> EdgeSnapshot | None:
    """One edge of a flow (operations §12.11); None when the flow has no such edge."""
    fid = parse_flow_id(flow_id)
    return _edge(fid, backend.client.hmget(flow_keys(backend, fid).edge(parse_edge_id(edge_id)), EDGE_FIELDS))


def list_edges(backend: Backend, flow_id: str, direction: str, execution_id: str) -> list[EdgeSnapshot]:
    """The edges leaving (`outgoing`) or entering (`incoming`) one member (operations §12.12), by edge id."""
    if direction not in DIRECTIONS:
        raise InvalidInput("invalid_input", [f"direction must be one of {', '.join(DIRECTIONS)}"])
    fid = parse_flow_id(flow_id)
    eid = ExecutionId(execution_id)
    fk = flow_keys(backend, fid)
    ids = sorted(text(e) for e in backend.client.smembers(fk.outgoing(eid) if direction == "outgoing"
                                                           else fk.incoming(eid)))
    raw = backend.read_many([("HMGET", fk.edge(e), *EDGE_FIELDS) for e in ids])
    return [s for r in raw if (s := _edge(fid, r)) is not None]


def edge_groups(graph: FlowGraph) -> list[EdgeGroupSnapshot]:
    """Every downstream member's inbound edge group, from a read flow (no further round trip)."""
    states = {n.eid: n.state for n in graph.nodes}
    by_down: dict[str, list[Edge]] = {}
    for e in graph.edges:
        by_down.setdefault(e.downstream, []).append(e)
    out = []
    for down in sorted(by_down):
        edges = by_down[down]
        record = graph.groups.get(down, {})
        policy = policy_of(record)
        satisfied = sum(e.state == "satisfied" for e in edges)
        skipped = sum(e.state == "impossible" and states.get(e.upstream) == "skipped" for e in edges)
        failed = sum(e.state == "impossible" for e in edges) - skipped
        group: GroupState
        if policy["kind"] != "all_of":
            stored = record.get("group_state", "")
            group = stored if stored in ("satisfied", "impossible", "cancelled") else "pending"  # type: ignore[assignment]
        else:
            group = "impossible" if failed or skipped else "satisfied" if satisfied == len(edges) else "pending"
        siblings = graph.cancelled_siblings.get(down, [])
        by_group = sum(e.state == "impossible" and e.upstream in siblings for e in edges)
        out.append(EdgeGroupSnapshot(down, policy, len(edges), satisfied, failed, skipped,
                                     len(edges) - satisfied - failed - skipped, group, siblings, by_group))
    return out


def describe_flow(backend: Backend, flow_id: str) -> FlowSnapshot | None:
    """A flow's typed read model with its edge groups (operations §12.9); None when it does not exist."""
    graph = read_flow(backend, parse_flow_id(flow_id))
    if graph is None:
        return None
    c = graph.core
    return FlowSnapshot(
        graph.flow_id, c.get("flow_kind", ""), c.get("namespace", ""), c.get("public_flow_state", ""),
        _int(c.get("graph_revision", "")), _int(c.get("node_count", "")), _int(c.get("edge_count", "")),
        _int(c.get("created_at", "")), _int(c.get("last_mutation_at", "")),
        _int(c["cancelled_at"]) if c.get("cancelled_at") else None, c.get("cancel_reason") or None,
        c.get("cancellation_policy") or None, read_flow_tags(backend, graph.flow_id), edge_groups(graph))
