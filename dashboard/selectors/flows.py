"""Read models: flows and the DAG view.

The flow page ships the graph as JSON (nodes, edges, states, graph revision); the page's script lays
it out once per revision and caches the layout. Flows over FOCUS_THRESHOLD members are not drawn whole:
the page shows a focus node plus k hops, and neighbours beyond a fan-out cap are collapsed into one
group node per (node, direction) reading "×N done / M failed". Such a view reads every member's kind
and state (counts, the default focus, group labels, the member list) but edges only around the members
it expands, so its cost follows what it shows rather than the flow's edge count.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ffcore.backend import Backend
from ffcore.execution.client import Execution
from ffcore.flows.reads import (
    STATE_ORDER,
    EdgeGroupSnapshot,
    FlowMembers,
    FlowPage,
    Node,
    edge_groups,
    list_flows,
    partition_of,
    read_flow,
    read_head,
    read_members,
)
from ffcore.flows.topology import CACHE, EdgeEnds, Topology, cache_key
from ffcore.ids import ExecutionId
from ffcore.keys import ExecKeys, FlowKeys
from ffcore.reads import text

from .flow_nodes import START_ORDER, node_details, start_member
from .sections import detail_section

#: Flows with more members than this open in focus mode.
FOCUS_THRESHOLD = 500
DEFAULT_HOPS = 2
MAX_HOPS = 6
#: Neighbours of one node shown per direction in focus mode; the rest are collapsed into a group.
FANOUT_CAP = 8
#: Upstream steps walked at most to find the root a big flow opens on.
ROOT_WALK_MAX = 64
#: Rows of the member list per page.
MEMBERS_PER_PAGE = 100
DONE = frozenset({"completed"})
BAD = frozenset({"failed", "cancelled", "expired", "skipped"})
#: States shown first when a fan-out must be cut (the interesting ones).
_INTEREST = {"failed": 0, "active": 1, "expired": 2, "suspended": 3, "cancelled": 4, "skipped": 5}


def flows_page(backend: Backend, cursor: str | None, limit: int = 50) -> FlowPage:
    return list_flows(backend, cursor=cursor, limit=limit)


@dataclass(frozen=True)
class GroupRow:
    """One edge group on the flow page: whose, its policy in words, its counts, state and cancelled siblings."""

    eid: str
    name: str
    policy: str
    counts: str
    state: str
    #: (eid, name) of the upstreams the group cancelled once it fired (cancel_remaining).
    cancelled: list[tuple[str, str]]


def policy_words(policy: dict[str, Any], total: int) -> str:
    """'all of 3', 'any of 3 · cancel remaining', 'quorum 2 of 3 · let run'."""
    kind = policy.get("kind", "all_of")
    on = str(policy.get("on_satisfied", "")).replace("_", " ")
    if kind == "any_of":
        return f"any of {total} · {on}"
    if kind == "quorum":
        return f"quorum {policy.get('k', 1)} of {total} · {on}"
    return f"all of {total}"


def _count_words(g: EdgeGroupSnapshot) -> str:
    parts = [f"{g.satisfied_count} succeeded"]
    # A sibling the group cancelled once it fired is the policy at work, not a failure.
    parts += [f"{n} {w}" for n, w in ((g.failed_count - g.sibling_cancelled_count, "failed"),
                                      (g.sibling_cancelled_count, "cancelled by the group"),
                                      (g.skipped_count, "skipped"), (g.running_count, "running")) if n]
    return " · ".join(parts)


def _needs(g: EdgeGroupSnapshot) -> int:
    kind = g.policy.get("kind")
    return 1 if kind == "any_of" else int(g.policy.get("k", 1)) if kind == "quorum" else g.total_deps


def group_rows(g: Any, names: dict[str, str]) -> tuple[list[GroupRow], str]:
    """The page's edge-group rows and why line from a whole read flow (FlowGraph)."""
    snaps = edge_groups(g)
    rows = [GroupRow(x.downstream_execution_id, names.get(x.downstream_execution_id, x.downstream_execution_id),
                     policy_words(x.policy, x.total_deps), _count_words(x), x.group_state,
                     [(e, names.get(e, e)) for e in x.cancelled_siblings]) for x in snaps]
    states = {n.eid: n.state for n in g.nodes}
    waiting = [x for x in snaps if x.group_state == "pending" and states.get(x.downstream_execution_id) ==
               "waiting_children"]
    # A group with a policy of its own is the more telling one to name.
    waiting.sort(key=lambda x: (x.policy.get("kind") == "all_of", x.downstream_execution_id))
    why = ""
    if waiting and g.core.get("public_flow_state") not in ("cancelled", "completed", "failed"):
        x = waiting[0]
        name = names.get(x.downstream_execution_id, x.downstream_execution_id)
        why = (f"Waiting: {name} waits for its edge group ({policy_words(x.policy, x.total_deps)}): "
               f"{x.satisfied_count} of {_needs(x)} needed succeeded, {x.running_count} still running")
        if len(waiting) > 1:
            why += f" — and {len(waiting) - 1} more group{'s' if len(waiting) > 2 else ''} waiting"
    return rows, why


@dataclass
class FlowView:
    graph: FlowMembers
    data: dict[str, Any]
    focus_mode: bool
    focus: str = ""
    hops: int = DEFAULT_HOPS
    counts: list[tuple[str, int]] = field(default_factory=list)
    #: One page of the member list (sorted by id), filtered by `member_state` when set.
    members: list[Node] = field(default_factory=list)
    member_state: str = ""
    member_page: int = 1
    member_pages: int = 1
    members_matching: int = 0
    #: Inbound edge groups as the page shows them (whole-graph view only; focus mode reads no group records).
    groups: list[GroupRow] = field(default_factory=list)
    #: The flow page's why line: which group a waiting member still waits on ("" when none).
    why: str = ""

    @property
    def total(self) -> int:
        return len(self.graph.nodes)

    @property
    def groups_open(self) -> bool:
        """The edge-group table opens when a group has a policy of its own or cancelled siblings."""
        return any(not r.policy.startswith("all of") or r.cancelled for r in self.groups)


def flow_view(backend: Backend, flow_id: str, *, focus: str | None = None, hops: int = DEFAULT_HOPS,
              href: str = "/executions/{}/", member_state: str = "", member_page: int = 1) -> FlowView | None:
    head = read_head(backend, flow_id)
    if head is None:
        return None
    if len(head[2]) <= FOCUS_THRESHOLD:
        g = read_flow(backend, flow_id, head)
        assert g is not None
        edges = [(e.edge_id, e.upstream, e.downstream) for e in g.edges]
        keep = {n.eid for n in g.nodes}
        data = _graph_json(g, keep, edges, {e.edge_id: e.state for e in g.edges}, [], href,
                           _details(backend, g, keep))
        has_upstream = {e.downstream for e in g.edges}
        data["start"] = start_member({n.eid: n.state for n in g.nodes},
                                     [n.eid for n in g.nodes if n.eid not in has_upstream])
        view = FlowView(g, data, False)
        names = {n["id"]: n["label"] for n in data["nodes"]}
        view.groups, view.why = group_rows(g, names)
        policies = {r.eid: r.policy for r in view.groups if not r.policy.startswith("all of")}
        for n in data["nodes"]:
            if n["id"] in policies:
                n["group"] = policies[n["id"]]  # the node's tooltip names its group's policy
    else:
        m = read_members(backend, flow_id, head=head)
        assert m is not None
        ids = {n.eid for n in m.nodes}
        topo = Topology(backend, head[0], cache=CACHE, key=cache_key(backend, head[0], m.core))
        start = focus if focus in ids else _default_focus(m, topo)
        keep, groups = _focus(topo, {n.eid: n.state for n in m.nodes}, start, hops)
        edges = topo.edges_among(keep)
        data = _graph_json(m, keep, edges, topo.edge_states(edges), groups, href, _details(backend, m, keep))
        topo.publish()
        data["focus"] = data["start"] = start
        view = FlowView(m, data, True, start, hops)
    view.counts = ordered_counts(view.graph.counts)
    _page_members(view, member_state, member_page)
    return view


def ordered_counts(counts: dict[str, int]) -> list[tuple[str, int]]:
    """Member counts in the page's state order (unknown states last), zeros left out."""
    out = [(s, counts[s]) for s in STATE_ORDER if counts.get(s)]
    return out + [(s, c) for s, c in counts.items() if s not in STATE_ORDER]


@dataclass
class FlowCounts:
    """The flow page's count chips (issue #25: they follow the DAG live): one read of the members' states."""

    flow_id: str
    state: str
    total: int
    counts: list[tuple[str, int]]


def flow_counts(backend: Backend, flow_id: str) -> FlowCounts | None:
    m = read_members(backend, flow_id)
    if m is None:
        return None
    return FlowCounts(m.flow_id, m.core.get("public_flow_state", ""), len(m.nodes), ordered_counts(m.counts))


@dataclass
class FlowGroups:
    """The flow page's edge-group table alone (it follows the flow live, as the count chips do)."""

    flow_id: str
    groups: list[GroupRow]


def flow_groups(backend: Backend, flow_id: str) -> FlowGroups | None:
    """The edge-group rows of a flow drawn whole (a focus-mode flow shows no table: none), naming only the members
    the table shows. None when the flow does not exist."""
    head = read_head(backend, flow_id)
    if head is None:
        return None
    if len(head[2]) > FOCUS_THRESHOLD:
        return FlowGroups(flow_id, [])
    g = read_flow(backend, flow_id, head)
    assert g is not None
    shown = {e for x in edge_groups(g) for e in (x.downstream_execution_id, *x.cancelled_siblings)}
    details = node_details(backend, {n.eid: n.kind for n in g.nodes if n.eid in shown})
    rows, _ = group_rows(g, {eid: d["name"] for eid, d in details.items()})
    return FlowGroups(flow_id, rows)


def _page_members(view: FlowView, state: str, page: int) -> None:
    rows = [n for n in view.graph.nodes if n.state == state] if state else view.graph.nodes
    view.member_state = state
    view.members_matching = len(rows)
    view.member_pages = max(1, -(-len(rows) // MEMBERS_PER_PAGE))
    view.member_page = min(max(1, page), view.member_pages)
    start = (view.member_page - 1) * MEMBERS_PER_PAGE
    view.members = rows[start:start + MEMBERS_PER_PAGE]


def _default_focus(m: FlowMembers, topo: Topology) -> str:
    """The first failed / running / held member, else a root: walk up from the first member (bounded)."""
    states = {n.eid: n.state for n in m.nodes}
    picked = start_member(states, [])
    if not states or states.get(picked) in START_ORDER:
        return picked
    node, seen = min(states), set()
    for _ in range(ROOT_WALK_MAX):
        seen.add(node)
        topo.expand([node])
        ups = sorted(x for _, x in topo.inc.get(node, []) if x not in seen)
        if not ups:
            break
        node = ups[0]
    return node


def _details(backend: Backend, m: FlowMembers, keep: set[str]) -> dict[str, dict[str, Any]]:
    return node_details(backend, {n.eid: n.kind for n in m.nodes if n.eid in keep})


#: How a collapsed fan-out names its members' states, in this order; the rest count as "other".
GROUP_WORDS = (("completed", "done"), ("failed", "failed"), ("cancelled", "cancelled"), ("skipped", "skipped"),
               ("expired", "expired"), ("active", "running"))
#: Longest group label (flow.js sizes group boxes for it, so a label that changes live still fits).
GROUP_LABEL_MAX = 40


def group_label(states: Iterable[str]) -> str:
    """'+N: 3 done · 8 skipped' — each state by its own name (cancelled and skipped are not failures)."""
    c = Counter(states)
    n = sum(c.values())
    parts = [f"{c[s]} {word}" for s, word in GROUP_WORDS if c[s]]
    other = n - sum(c[s] for s, _ in GROUP_WORDS)
    if other:
        parts.append(f"{other} other")
    text = f"+{n}: " + " · ".join(parts)
    return text if len(text) <= GROUP_LABEL_MAX else text[:GROUP_LABEL_MAX - 1] + "…"


def _focus(topo: Topology, state: dict[str, str], start: str, hops: int) -> tuple[set[str], list[dict[str, Any]]]:
    """Breadth-first from `start`, `hops` levels, at most FANOUT_CAP new neighbours per node and direction."""
    keep = {start}
    groups: list[dict[str, Any]] = []
    frontier = [start]
    for _ in range(hops):
        topo.expand(frontier)
        nxt: list[str] = []
        for node in frontier:
            for direction, nbrs in (("down", topo.out[node]), ("up", topo.inc[node])):
                fresh = sorted({x for _, x in nbrs if x not in keep},
                               key=lambda x: (_INTEREST.get(state.get(x, ""), 9), x))
                shown, rest = fresh[:FANOUT_CAP], fresh[FANOUT_CAP:]
                keep.update(shown)
                nxt += shown
                if rest:
                    groups.append({"id": f"group:{node}:{direction}", "anchor": node, "direction": direction,
                                   "count": len(rest), "label": group_label(state.get(x, "unknown") for x in rest)})
        frontier = nxt
    return keep, groups


def _graph_json(m: FlowMembers, keep: set[str], edges: list[EdgeEnds], states: dict[str, str],
                groups: list[dict[str, Any]], href: str, details: dict[str, dict[str, Any]]) -> dict[str, Any]:
    nodes = [{"id": n.eid, "label": details[n.eid]["name"], "kind": n.kind, "state": n.state,
              "href": href.format(n.eid), "started": details[n.eid]["started"], "ended": details[n.eid]["ended"]}
             for n in m.nodes if n.eid in keep]
    out = [{"id": e, "from": up, "to": down, "state": states.get(e) or "pending"} for e, up, down in edges
           if up in keep and down in keep]
    for grp in groups:
        nodes.append({"id": grp["id"], "label": grp["label"], "state": "group", "href": ""})
        a, b = (grp["anchor"], grp["id"]) if grp["direction"] == "down" else (grp["id"], grp["anchor"])
        out.append({"id": f"{grp['id']}:edge", "from": a, "to": b, "state": "group"})
    return {"flow_id": m.flow_id, "revision": m.revision, "nodes": nodes, "edges": out}


def flow_states(backend: Backend, flow_id: str, *, focus: str | None = None,
                hops: int = DEFAULT_HOPS) -> dict[str, Any] | None:
    """The live part of a flow page: revision, states of the drawn nodes and edges, group labels, counts.

    A big flow answers for the same focus and hops as the page that asks (the page sends them), so a
    refresh costs what the page's first read cost, not a read of the whole flow.
    """
    v = flow_view(backend, flow_id, focus=focus, hops=hops)
    if v is None:
        return None
    nodes = v.data["nodes"]
    return {"revision": v.graph.revision, "state": v.graph.state, "counts": v.graph.counts,
            "nodes": {n["id"]: n["state"] for n in nodes if n["state"] != "group"},
            "edges": {e["id"]: e["state"] for e in v.data["edges"] if e["state"] != "group"},
            "groups": {n["id"]: n["label"] for n in nodes if n["state"] == "group"},
            "times": {n["id"]: [n["started"], n["ended"]] for n in nodes if n["state"] != "group"}}


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
