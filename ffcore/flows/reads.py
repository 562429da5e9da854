"""Reading flows: a whole DAG in three round trips, member counts by state, the newest-first flow list.

Round trips of `read_flow`: (1) flow core + member set, (2) each member's core fields and inbound edge
ids, (3) each inbound edge's child-local record (ends, kind and resolution state; a fourth trip reads
the flow's edge record only for edges staged but not yet applied to their child). `read_members`
stops after a lighter (2), for views of big flows that read edges only around some members
(`flow_topology`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ffcore import keys
from ffcore.backend import Backend
from ffcore.errors import InvalidInput
from ffcore.execution.listing import merge_desc, parse_cursor
from ffcore.ids import parse_flow_id
from ffcore.keys import ExecKeys, FlowKeys
from ffcore.partition import flow_partition
from ffcore.reads import decode_map, text

NODE_FIELDS = ("execution_kind", "public_state", "lane_id", "terminal_outcome", "blocking_reason", "created_at",
               "completed_at", "total_attempt_count", "replay_count")
#: Public states counted as finished.
TERMINAL_STATES = frozenset({"completed", "failed", "cancelled", "expired", "skipped"})
#: Order the dashboard shows counts in.
STATE_ORDER = ("waiting", "delayed", "rate_limited", "waiting_children", "active", "suspended", "completed",
               "failed", "cancelled", "expired", "skipped")


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
                             for c in (("HMGET", ExecKeys(m).core, *NODE_FIELDS), ("SMEMBERS", fk.incoming(m)))])
    nodes: list[Node] = []
    inbound: list[tuple[str, str]] = []  # (edge id, downstream)
    for i, m in enumerate(members):
        nodes.append(Node(m, dict(zip(NODE_FIELDS, map(text, raw[2 * i]), strict=True))))
        inbound += [(text(e), m) for e in sorted(raw[2 * i + 1])]
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
    return FlowGraph(flow_id, core, nodes, dict(Counter(n.state for n in nodes)), edges)


_DEP_FIELDS = ("upstream_execution_id", "dependency_kind", "data_passing_ref", "state")


def member_counts(backend: Backend, flow_ids: list[str]) -> dict[str, dict[str, int]]:
    """{flow: {public state: members}} for several flows in two round trips."""
    fks = [flow_keys(backend, f) for f in flow_ids]
    member_sets = [sorted(text(m) for m in s) for s in backend.read_many([("SMEMBERS", fk.members) for fk in fks])]
    states = iter(backend.read_many([("HGET", ExecKeys(m).core, "public_state") for ms in member_sets for m in ms]))
    return {f: dict(Counter(text(next(states)) or "unknown" for _ in ms))
            for f, ms in zip(flow_ids, member_sets, strict=True)}


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
    index_keys = [keys.flows_created(n) for n in range(p)]
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
            counts[f] = {st: int(s[st]) for st in STATE_ORDER if s.get(st, "").isdigit() and int(s[st])}
    return FlowPage([FlowRow(f, cores[f], counts.get(f, {}), f not in uncounted) for f in found], nxt or None)
