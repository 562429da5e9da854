"""Reading flows: a whole DAG in three round trips, member counts by state, the newest-first flow list.

Round trips of `read_flow`: (1) flow core + member set, (2) each member's core fields and inbound edge
ids, (3) each inbound edge's record and the child-local copy that carries its resolution state.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from . import keys
from .backend import Backend
from .errors import InvalidInput
from .ids import parse_flow_id
from .keys import ExecKeys, FlowKeys
from .listing import merge_desc, parse_cursor
from .partition import flow_partition
from .reads import decode_map, text

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
class FlowGraph:
    flow_id: str
    core: dict[str, str]
    nodes: list[Node]
    edges: list[Edge]
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def revision(self) -> str:
        return self.core.get("graph_revision", "0")

    @property
    def state(self) -> str:
        """Stored state when cancelled, else derived from the members (as the flow projector does)."""
        return derived_state(self.core.get("public_flow_state", ""), self.counts)


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


def read_flow(backend: Backend, flow_id: str) -> FlowGraph | None:
    """The whole flow: core, every member with its public state, every edge with its resolution state."""
    fk = flow_keys(backend, flow_id)
    pipe = backend.client.pipeline(transaction=False)
    pipe.hgetall(fk.core)
    pipe.smembers(fk.members)
    core_raw, members_raw = pipe.execute()
    if not core_raw:
        return None
    members = sorted(text(m) for m in members_raw)
    pipe = backend.client.pipeline(transaction=False)
    for m in members:
        pipe.hmget(ExecKeys(m).core, NODE_FIELDS)
        pipe.smembers(fk.incoming(m))
    raw = pipe.execute() if members else []
    nodes: list[Node] = []
    inbound: list[tuple[str, str]] = []  # (edge id, downstream)
    for i, m in enumerate(members):
        nodes.append(Node(m, dict(zip(NODE_FIELDS, map(text, raw[2 * i]), strict=True))))
        inbound += [(text(e), m) for e in sorted(raw[2 * i + 1])]
    pipe = backend.client.pipeline(transaction=False)
    for e, down in inbound:
        pipe.hmget(fk.edge(e), ["upstream_execution_id", "dependency_kind", "data_passing_ref"])
        pipe.hget(ExecKeys(down).dep_edge(e), "state")
    raw = pipe.execute() if inbound else []
    edges = []
    for i, (e, down) in enumerate(inbound):
        up, kind, ref = map(text, raw[2 * i])
        edges.append(Edge(e, up, down, kind, text(raw[2 * i + 1]), ref))
    counts = dict(Counter(n.state for n in nodes))
    return FlowGraph(flow_id, decode_map(core_raw), nodes, edges, counts)


def member_counts(backend: Backend, flow_ids: list[str]) -> dict[str, dict[str, int]]:
    """{flow: {public state: members}} for several flows in two round trips."""
    fks = [flow_keys(backend, f) for f in flow_ids]
    pipe = backend.client.pipeline(transaction=False)
    for fk in fks:
        pipe.smembers(fk.members)
    member_sets = [sorted(text(m) for m in s) for s in pipe.execute()] if fks else []
    pipe = backend.client.pipeline(transaction=False)
    for ms in member_sets:
        for m in ms:
            pipe.hget(ExecKeys(m).core, "public_state")
    states = iter(pipe.execute() if any(member_sets) else [])
    return {f: dict(Counter(text(next(states)) or "unknown" for _ in ms))
            for f, ms in zip(flow_ids, member_sets, strict=True)}


@dataclass(frozen=True)
class FlowRow:
    flow_id: str
    core: dict[str, str]
    counts: dict[str, int]

    @property
    def state(self) -> str:
        return derived_state(self.core.get("public_flow_state", ""), self.counts)

    @property
    def total(self) -> int:
        return sum(self.counts.values())


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
    if big:
        pipe = backend.client.pipeline(transaction=False)
        for f in big:
            pipe.hgetall(flow_keys(backend, f).summary)
        for f, summ in zip(big, pipe.execute(), strict=True):
            s = decode_map(summ)
            counts[f] = {st: int(s[st]) for st in STATE_ORDER if s.get(st, "0").isdigit() and int(s[st])}
    return FlowPage([FlowRow(f, cores[f], counts.get(f, {})) for f in found], nxt or None)
