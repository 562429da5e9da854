"""Reading flows: edges from the child's copy (and the flow's record before it is applied), members only,
edges around chosen members (`flow_topology`) and the per-revision topology cache."""

from __future__ import annotations

import random

from ffcore import functions as F
from ffcore.backend import Backend
from ffcore.flows.flows import Flows
from ffcore.flows.reads import read_flow, read_head, read_members
from ffcore.flows.topology import Topology, TopologyCache, cache_key
from ffcore.ids import new_uuid


def _random_dag(backend: Backend, n: int, seed: int) -> tuple[str, list[str]]:
    rnd = random.Random(seed)
    flows = Flows(backend)
    fid = flows.create(kind="random")
    edges = {(rnd.randrange(0, j), j) for j in range(1, n) for _ in range(rnd.choice((1, 1, 2, 3)))}
    edges |= {(0, j) for j in range(1, n, 3)}  # a hub, so fan-outs get cut
    ids = flows.build(fid, [{"kind": f"k{i}"} for i in range(n)], edges=sorted(edges))
    return fid, [str(e) for e in ids]


def test_an_edge_staged_but_not_applied_is_read_from_the_flow_record_without_a_state(backend: Backend):
    flows = Flows(backend)
    fid = flows.create()
    a, b = flows.build(fid, [{"kind": "a"}, {"kind": "b"}])
    applied = flows.add_edge(fid, a, b)
    c, = flows.build(fid, [{"kind": "c"}])
    rev = read_head(backend, fid)[1]["graph_revision"]  # type: ignore[index]
    staged = new_uuid()
    backend.call(F.stage_dependency_edge(flows.keys(fid), edge_id=staged, upstream=b, downstream=c,
                                         expected_revision=rev, now_ms=backend.now_ms(), data_passing_ref="out"))
    g = read_flow(backend, fid)
    assert g is not None
    by_id = {e.edge_id: e for e in g.edges}
    assert (by_id[applied].upstream, by_id[applied].downstream, by_id[applied].state) == (a, b, "unsatisfied")
    assert (by_id[staged].upstream, by_id[staged].downstream, by_id[staged].state) == (b, c, "")
    assert by_id[staged].kind == F.SUCCESS_ONLY and by_id[staged].data_passing_ref == "out"
    assert g.edge_count == 2


def test_members_only_reads_kind_and_state_of_every_member_and_counts_them(backend: Backend):
    fid, ids = _random_dag(backend, 30, seed=1)
    m = read_members(backend, fid)
    assert m is not None
    assert [n.eid for n in m.nodes] == sorted(ids)
    assert {n.eid: n.kind for n in m.nodes} == {e: f"k{i}" for i, e in enumerate(ids)}
    assert m.counts == {"waiting": 1, "waiting_children": 29}
    assert read_members(backend, new_uuid()) is None


def test_edges_around_members_match_the_whole_graph(backend: Backend):
    fid, ids = _random_dag(backend, 40, seed=2)
    whole = read_flow(backend, fid)
    assert whole is not None
    fk = Flows(backend).keys(fid)
    rnd = random.Random(3)
    for _ in range(5):
        expanded = set(rnd.sample(ids, 6))
        shown = expanded | set(rnd.sample(ids, 10))
        topo = Topology(backend, fk)
        topo.expand(expanded)
        for m in expanded:
            assert sorted(topo.out[m]) == sorted((e.edge_id, e.downstream) for e in whole.edges if e.upstream == m)
            assert sorted(topo.inc[m]) == sorted((e.edge_id, e.upstream) for e in whole.edges if e.downstream == m)
        among = topo.edges_among(shown)
        assert among == sorted((e.edge_id, e.upstream, e.downstream) for e in whole.edges
                               if e.upstream in shown and e.downstream in shown)
        drawn = {x[0] for x in among}
        assert topo.edge_states(among) == {e.edge_id: e.state for e in whole.edges if e.edge_id in drawn}


def test_the_topology_cache_serves_one_revision_and_a_new_edge_makes_a_new_one(backend: Backend):
    flows = Flows(backend)
    fid = flows.create()
    a, b, c = flows.build(fid, [{"kind": "a"}, {"kind": "b"}, {"kind": "c"}], edges=[(0, 1)])
    fk = flows.keys(fid)
    cache = TopologyCache()

    def topology() -> Topology:
        head = read_head(backend, fid)
        assert head is not None
        return Topology(backend, fk, cache=cache, key=cache_key(backend, fk, head[1]))

    first = topology()
    first.expand([a])
    first.publish()
    trips: list[int] = []
    real = backend.client.pipeline

    def counting(*args, **kw):
        trips.append(1)
        return real(*args, **kw)

    again = topology()
    backend.client.pipeline = counting
    try:
        again.expand([a])
    finally:
        backend.client.pipeline = real
    assert trips == [] and [down for _, down in again.out[a]] == [b]  # served from the cache
    flows.add_edge(fid, a, c)  # a new revision
    fresh = topology()
    fresh.expand([a])
    assert sorted(down for _, down in fresh.out[a]) == sorted([b, c])
    fresh.publish()
    assert len(cache._entries) == 1  # the older revision of the same flow was dropped
