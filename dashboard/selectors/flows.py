"""Read models: flows and the DAG view.

The flow page ships the graph as JSON (nodes, edges, states, graph revision); the page's script lays
it out once per revision and caches the layout. Flows over FOCUS_THRESHOLD members are not drawn whole:
the page shows a focus node plus k hops, and neighbours beyond a fan-out cap are collapsed into one
group node per (node, direction) reading "×N done / M failed".
"""

from __future__ import annotations

from collections import Counter, defaultdict, deque
from dataclasses import dataclass, field
from typing import Any

from ffcore.backend import Backend
from ffcore.client import Execution
from ffcore.flow_reads import STATE_ORDER, FlowGraph, FlowPage, list_flows, partition_of, read_flow
from ffcore.ids import ExecutionId
from ffcore.keys import ExecKeys, FlowKeys
from ffcore.reads import text

from . import detail_section

#: Flows with more members than this open in focus mode.
FOCUS_THRESHOLD = 500
DEFAULT_HOPS = 2
MAX_HOPS = 6
#: Neighbours of one node shown per direction in focus mode; the rest are collapsed into a group.
FANOUT_CAP = 8
DONE = frozenset({"completed"})
BAD = frozenset({"failed", "cancelled", "expired", "skipped"})
#: States shown first when a fan-out must be cut (the interesting ones).
_INTEREST = {"failed": 0, "active": 1, "expired": 2, "suspended": 3, "cancelled": 4, "skipped": 5}


def flows_page(backend: Backend, cursor: str | None, limit: int = 50) -> FlowPage:
    return list_flows(backend, cursor=cursor, limit=limit)


@dataclass
class FlowView:
    graph: FlowGraph
    data: dict[str, Any]
    focus_mode: bool
    focus: str = ""
    hops: int = DEFAULT_HOPS
    counts: list[tuple[str, int]] = field(default_factory=list)

    @property
    def total(self) -> int:
        return len(self.graph.nodes)


def flow_view(backend: Backend, flow_id: str, *, focus: str | None = None, hops: int = DEFAULT_HOPS,
              href: str = "/executions/{}/") -> FlowView | None:
    g = read_flow(backend, flow_id)
    if g is None:
        return None
    counts = [(s, g.counts[s]) for s in STATE_ORDER if g.counts.get(s)]
    counts += [(s, c) for s, c in g.counts.items() if s not in STATE_ORDER]
    big = len(g.nodes) > FOCUS_THRESHOLD
    if not big:
        data = _graph_json(g, {n.eid for n in g.nodes}, [], href)
        return FlowView(g, data, False, counts=counts)
    ids = {n.eid for n in g.nodes}
    start = focus if focus in ids else _default_focus(g)
    keep, groups = _focus(g, start, hops)
    data = _graph_json(g, keep, groups, href)
    data["focus"] = start
    return FlowView(g, data, True, start, hops, counts)


def _default_focus(g: FlowGraph) -> str:
    """The most interesting member: a failed one, else an active one, else the first."""
    ranked = sorted(g.nodes, key=lambda n: (_INTEREST.get(n.state, 9), n.eid))
    return ranked[0].eid if ranked else ""


def _focus(g: FlowGraph, start: str, hops: int) -> tuple[set[str], list[dict[str, Any]]]:
    state = {n.eid: n.state for n in g.nodes}
    out: dict[str, list[str]] = defaultdict(list)
    inc: dict[str, list[str]] = defaultdict(list)
    for e in g.edges:
        out[e.upstream].append(e.downstream)
        inc[e.downstream].append(e.upstream)
    keep = {start}
    groups: list[dict[str, Any]] = []
    queue = deque([(start, 0)])
    while queue:
        node, d = queue.popleft()
        if d >= hops:
            continue
        for direction, nbrs in (("down", out[node]), ("up", inc[node])):
            fresh = sorted((x for x in nbrs if x not in keep), key=lambda x: (_INTEREST.get(state[x], 9), x))
            shown, rest = fresh[:FANOUT_CAP], fresh[FANOUT_CAP:]
            for x in shown:
                keep.add(x)
                queue.append((x, d + 1))
            if rest:
                c = Counter(state[x] for x in rest)
                done, bad = sum(c[s] for s in DONE), sum(c[s] for s in BAD)
                groups.append({"id": f"group:{node}:{direction}", "anchor": node, "direction": direction,
                               "count": len(rest), "label": f"×{done} done / {bad} failed"
                               + (f" / {len(rest) - done - bad} other" if len(rest) - done - bad else "")})
    return keep, groups


def _graph_json(g: FlowGraph, keep: set[str], groups: list[dict[str, Any]], href: str) -> dict[str, Any]:
    nodes = [{"id": n.eid, "label": n.kind or n.eid[-8:], "state": n.state, "href": href.format(n.eid)}
             for n in g.nodes if n.eid in keep]
    edges = [{"id": e.edge_id, "from": e.upstream, "to": e.downstream, "state": e.state or "pending"}
             for e in g.edges if e.upstream in keep and e.downstream in keep]
    for grp in groups:
        nodes.append({"id": grp["id"], "label": grp["label"], "state": "group", "href": ""})
        a, b = (grp["anchor"], grp["id"]) if grp["direction"] == "down" else (grp["id"], grp["anchor"])
        edges.append({"id": f"{grp['id']}:edge", "from": a, "to": b, "state": "group"})
    return {"flow_id": g.flow_id, "revision": g.revision, "nodes": nodes, "edges": edges}


def flow_states(backend: Backend, flow_id: str) -> dict[str, Any] | None:
    """The live part of a flow page: revision, per-node and per-edge states, counts."""
    g = read_flow(backend, flow_id)
    if g is None:
        return None
    return {"revision": g.revision, "state": g.state, "counts": g.counts,
            "nodes": {n.eid: n.state for n in g.nodes},
            "edges": {e.edge_id: e.state or "pending" for e in g.edges}}


# ------------------------------------------------------------------ execution detail section
@dataclass(frozen=True)
class EdgeRow:
    edge_id: str
    other: str
    other_state: str
    kind: str
    state: str


@dataclass(frozen=True)
class FlowSection:
    flow_id: str
    upstream: list[EdgeRow]
    downstream: list[EdgeRow]
    unresolved: int


@detail_section("flow")
def flow_section(backend: Backend, ex: Execution) -> FlowSection | None:
    flow_id = ex.core.get("flow_id", "")
    if not flow_id:
        return None
    eid = ExecutionId(ex.execution_id)
    try:
        fk = FlowKeys(partition_of(backend, flow_id), flow_id)
    except ValueError:
        return FlowSection(flow_id, [], [], 0)
    pipe = backend.client.pipeline(transaction=False)
    pipe.smembers(fk.incoming(eid))
    pipe.smembers(fk.outgoing(eid))
    pipe.scard(ExecKeys(eid).deps_unresolved)
    inc_raw, out_raw, unresolved = pipe.execute()
    inc, out = sorted(text(x) for x in inc_raw), sorted(text(x) for x in out_raw)
    pipe = backend.client.pipeline(transaction=False)
    for e in inc + out:
        pipe.hmget(fk.edge(e), ["upstream_execution_id", "downstream_execution_id", "dependency_kind"])
    recs = [tuple(map(text, r)) for r in pipe.execute()] if inc or out else []
    pipe = backend.client.pipeline(transaction=False)
    for e, (up, down, _) in zip(inc + out, recs, strict=True):
        other = up if e in inc else down
        pipe.hget(ExecKeys(down or eid).dep_edge(e), "state")
        pipe.hget(ExecKeys(other or eid).core, "public_state")
    raw = pipe.execute() if recs else []
    rows = []
    for i, (e, (up, down, kind)) in enumerate(zip(inc + out, recs, strict=True)):
        rows.append(EdgeRow(e, up if e in inc else down, text(raw[2 * i + 1]), kind, text(raw[2 * i]) or "pending"))
    return FlowSection(flow_id, rows[:len(inc)], rows[len(inc):], int(unresolved))
