"""A flow's History: created, members added, edges staged, cancelled, members finishing, the flow finishing —
read from the flow core, its edges and its members' cores (ffcore.flows.reads: a bounded number of round
trips whatever the flow's size) and paged like an execution's (ffcore.execution.history)."""

from __future__ import annotations

from ..backend import Backend
from ..execution.history import PAGE_MAX, PAGE_SIZE, Entry, HistoryPage
from ..reads import text
from .reads import TERMINAL_STATES, flow_keys, read_flow, read_head

#: Members above which a flow's History lists the flow's own facts only (its page and DAG show the members).
MAX_MEMBERS = 2000


def _int(v: str | None) -> int:
    return int(v) if v and v.isdigit() else 0


def read(backend: Backend, flow_id: str) -> list[Entry] | None:
    """Every entry, oldest first; None when the flow does not exist."""
    head = read_head(backend, flow_id)
    if head is None:
        return None
    if len(head[2]) > MAX_MEMBERS:
        return _flow_only(head[1], len(head[2]))
    g = read_flow(backend, flow_id, head)
    if g is None:
        return None
    fk = flow_keys(backend, flow_id)
    stamps = backend.read_many([("HMGET", fk.edge(e.edge_id), "created_at", "created_by") for e in g.edges])
    core = g.core
    out = [Entry(_int(core.get("created_at")), "created", "Flow created", "",
                 f"kind {core.get('flow_kind', '')}" if core.get("flow_kind") else "")]
    for n in g.nodes:
        # The contract keeps no add time: a member appears when it was created (members are added right after).
        out.append(Entry(_int(n.fields.get("created_at")), "member", "Member added", "",
                         f"{n.eid} · {n.kind}"))
        if n.state in TERMINAL_STATES and n.fields.get("completed_at"):
            out.append(Entry(_int(n.fields["completed_at"]), "member_finished", f"Member {n.state}", "",
                             f"{n.eid} · {n.kind}"))
    for e, (at, by) in zip(g.edges, stamps, strict=True):
        out.append(Entry(_int(text(at)), "edge", "Edge staged", text(by),
                         f"{e.upstream} → {e.downstream} · {e.kind}{' · ' + e.state if e.state else ''}"))
    if core.get("cancelled_at"):
        out.append(Entry(_int(core["cancelled_at"]), "cancelled", "Flow cancelled", "",
                         " · ".join(x for x in (core.get("cancel_reason", ""), core.get("cancellation_policy", ""))
                                    if x)))
    ends = [_int(n.fields.get("completed_at")) for n in g.nodes]
    if g.nodes and all(n.state in TERMINAL_STATES for n in g.nodes):
        failed = sum(n.state != "completed" for n in g.nodes)
        out.append(Entry(max(ends), "finished", "Flow finished", "",
                         f"{len(g.nodes)} members · {failed} not completed" if failed else
                         f"all {len(g.nodes)} members completed"))
    order = {"created": 0, "member": 1, "edge": 2, "member_finished": 3, "cancelled": 4, "finished": 5}
    return sorted(out, key=lambda x: (x.ts, order.get(x.kind, 3)))


def _flow_only(core: dict[str, str], members: int) -> list[Entry]:
    out = [Entry(_int(core.get("created_at")), "created", "Flow created", "",
                 f"{members} members: too many to list each one here")]
    if core.get("cancelled_at"):
        out.append(Entry(_int(core["cancelled_at"]), "cancelled", "Flow cancelled", "", core.get("cancel_reason", "")))
    return out


def page(backend: Backend, flow_id: str, cursor: str = "", limit: int = PAGE_SIZE) -> HistoryPage | None:
    entries = read(backend, flow_id)
    if entries is None:
        return None
    start = int(cursor) if cursor.isdigit() else 0
    end = start + max(1, min(limit, PAGE_MAX))
    return HistoryPage(entries[start:end], str(end) if end < len(entries) else "", len(entries))
