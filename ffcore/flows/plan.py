"""Planning a flow build before any write: membership and cycle checks, and the transaction batches.

MULTI/EXEC does not roll back, so a refused `ff_stage_dependency_edge` inside one would still let the
calls after it run. Everything the library would refuse for a well-formed batch (unknown members, a
cycle, a duplicate edge id) is therefore checked here first. Batches follow a topological order of the
new members and carry each member's inbound edges, so a member is never visible without them.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Sequence

from ffcore.errors import ERRORS

#: (upstream eid, downstream eid)
Pair = tuple[str, str]


def check_acyclic(existing: Sequence[Pair], batch: Sequence[Pair]) -> None:
    """Raise CycleDetected when the existing edges plus the batch's contain a cycle."""
    out: dict[str, list[str]] = defaultdict(list)
    indeg: dict[str, int] = defaultdict(int)
    for up, down in [*existing, *batch]:
        out[up].append(down)
        indeg[down] += 1
        indeg.setdefault(up, 0)
    ready = deque(n for n, d in indeg.items() if d == 0)
    seen = 0
    while ready:
        node = ready.popleft()
        seen += 1
        for nxt in out[node]:
            indeg[nxt] -= 1
            if indeg[nxt] == 0:
                ready.append(nxt)
    if seen != len(indeg):
        raise ERRORS["cycle_detected"]("cycle_detected", [], "ff_stage_dependency_edge")


def batches(new: Sequence[str], edges: Sequence[Pair], max_batch: int) -> list[tuple[list[str], list[int]]]:
    """Split into transactions: (new members, indexes of edges) with every edge in the batch of its child.

    New members go in topological order (over the batch's edges), so an edge's upstream is created in
    the same or an earlier batch. Edges into existing members ride with the first batch.
    """
    pos = {e: i for i, e in enumerate(new)}
    inbound: dict[str, list[int]] = defaultdict(list)
    for i, (_, down) in enumerate(edges):
        inbound[down].append(i)
    out: dict[str, list[str]] = defaultdict(list)
    indeg = dict.fromkeys(new, 0)
    for up, down in edges:
        if up in pos and down in pos:
            out[up].append(down)
            indeg[down] += 1
    ready = deque(e for e in new if indeg[e] == 0)
    order = []
    while ready:
        node = ready.popleft()
        order.append(node)
        for nxt in out[node]:
            indeg[nxt] -= 1
            if indeg[nxt] == 0:
                ready.append(nxt)
    plan: list[tuple[list[str], list[int]]] = [([], [i for i, (_, d) in enumerate(edges) if d not in pos])]
    for m in order:
        members, idx = plan[-1]
        if members and len(members) + len(idx) + 1 + len(inbound[m]) > max_batch:
            plan.append(([], []))
            members, idx = plan[-1]
        members.append(m)
        idx += inbound[m]
    return [p for p in plan if p[0] or p[1]]
