"""A flow's edges read around chosen members, for views that show only part of a big flow.

A member's edges are listed in its `out:` / `in:` edge-id sets; the other end of an edge is in the
flow's edge record. Nothing here reads the whole flow: the work is proportional to the edges of the
members asked about, in a fixed number of round trips per call.

What was read can be kept in a `TopologyCache` for the flow's graph revision: every change to a flow's
members or edges bumps `graph_revision` (add member, stage edge), edges are never removed and an edge
record's ends never change, so adjacency read at one revision stays true until the next.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field

from ffcore.backend import Backend
from ffcore.keys import ExecKeys, FlowKeys
from ffcore.reads import text

#: (edge id, upstream, downstream)
EdgeEnds = tuple[str, str, str]


@dataclass
class _Known:
    out: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    inc: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    ends: dict[str, tuple[str, str]] = field(default_factory=dict)


class TopologyCache:
    """Adjacency read per (flow, revision), shared by the requests of one process, LRU-bounded by edges.

    Entries are replaced whole, never changed in place, so readers need no lock.
    """

    #: About half a kilobyte of Python objects per edge kept: the default bounds the cache near 25 MB.
    def __init__(self, max_edges: int = 50_000) -> None:
        self.max_edges = max_edges
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple[str, ...], _Known] = OrderedDict()

    def get(self, key: tuple[str, ...]) -> _Known | None:
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None:
                self._entries.move_to_end(key)
            return hit

    def put(self, key: tuple[str, ...], known: _Known) -> None:
        with self._lock:
            same = [k for k in self._entries if k[:2] == key[:2] and k != key]
            if any(_rev(k) > _rev(key) for k in same):
                return  # a slower reader of an older revision: keep the newer one
            for k in same:  # older revisions of the same flow are dead weight
                del self._entries[k]
            self._entries[key] = known
            self._entries.move_to_end(key)
            while len(self._entries) > 1 and sum(len(v.ends) for v in self._entries.values()) > self.max_edges:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


def _rev(key: tuple[str, ...]) -> int:
    return int(key[3]) if key[3].isdigit() else -1


#: The process-wide cache the dashboard uses.
CACHE = TopologyCache()


def cache_key(backend: Backend, fk: FlowKeys, core: dict[str, str]) -> tuple[str, ...]:
    """What identifies one flow's topology: server, flow, its creation (ids can be reused) and revision."""
    return (backend.url, fk.flow_id, core.get("created_at", ""), core.get("graph_revision", "0"),
            core.get("edge_count", "0"))


class Topology:
    """Edges of one flow, read lazily per member; with a cache, shared with later reads of the same revision."""

    def __init__(self, backend: Backend, fk: FlowKeys, *, cache: TopologyCache | None = None,
                 key: tuple[str, ...] = ()) -> None:
        self.backend = backend
        self.fk = fk
        self._cache = cache if key else None
        self._key = key
        known = self._cache.get(key) if self._cache else None
        #: member -> [(edge id, downstream)] / [(edge id, upstream)], for members `expand`ed so far.
        self.out: dict[str, list[tuple[str, str]]] = dict(known.out) if known else {}
        self.inc: dict[str, list[tuple[str, str]]] = dict(known.inc) if known else {}
        self._ends: dict[str, tuple[str, str]] = dict(known.ends) if known else {}
        self._grew = False

    def expand(self, members: Iterable[str]) -> None:
        """Read every edge of `members` (those not read yet) with both its ends: two round trips."""
        todo = sorted({m for m in members if m not in self.out})
        if not todo:
            return
        raw = self.backend.read_many([("SMEMBERS", k) for m in todo
                                      for k in (self.fk.outgoing(m), self.fk.incoming(m))])
        ids = [(sorted(text(e) for e in raw[2 * i]), sorted(text(e) for e in raw[2 * i + 1]))
               for i in range(len(todo))]
        unknown = sorted({e for out, inc in ids for e in (*out, *inc)} - self._ends.keys())
        if unknown:
            ends = self.backend.read_many([("HMGET", self.fk.edge(e), "upstream_execution_id",
                                            "downstream_execution_id") for e in unknown])
            for e, (up, down) in zip(unknown, ends, strict=True):
                self._ends[e] = (text(up), text(down))
        for m, (out, inc) in zip(todo, ids, strict=True):
            self.out[m] = [(e, self._ends[e][1]) for e in out if self._ends[e][1]]
            self.inc[m] = [(e, self._ends[e][0]) for e in inc if self._ends[e][0]]
        self._grew = True

    def publish(self) -> None:
        """Offer what this object read to the cache (for the revision it was created for)."""
        if self._cache is not None and self._grew:
            self._cache.put(self._key, _Known(dict(self.out), dict(self.inc), dict(self._ends)))
            self._grew = False

    def edges_among(self, members: set[str]) -> list[EdgeEnds]:
        """Every edge with both ends in `members`, sorted by edge id (one round trip at most).

        Edges touching an expanded member are known already; between two members not expanded, an
        edge is one whose id is in the first's `out:` set and the second's `in:` set, so only the id
        sets are read (no edge records).
        """
        found: dict[str, tuple[str, str]] = {}
        for m in members:
            for e, down in self.out.get(m, ()):
                if down in members:
                    found[e] = (m, down)
            for e, up in self.inc.get(m, ()):
                if up in members:
                    found[e] = (up, m)
        rest = sorted(m for m in members if m not in self.out)
        if len(rest) > 1:
            raw = self.backend.read_many([("SMEMBERS", k) for m in rest
                                          for k in (self.fk.outgoing(m), self.fk.incoming(m))])
            leaves: dict[str, str] = {}
            for i, m in enumerate(rest):
                leaves.update((text(e), m) for e in raw[2 * i])
            for i, m in enumerate(rest):
                for e in map(text, raw[2 * i + 1]):
                    if e in leaves:
                        found[e] = (leaves[e], m)
        return sorted((e, up, down) for e, (up, down) in found.items())

    def edge_states(self, edges: list[EdgeEnds]) -> dict[str, str]:
        """Resolution state of each edge from its child's copy ("" while staged but not applied)."""
        states = self.backend.read_many([("HGET", ExecKeys(down).dep_edge(e), "state") for e, _, down in edges])
        return {e: text(st) for (e, _, _), st in zip(edges, states, strict=True)}
