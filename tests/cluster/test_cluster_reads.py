"""Dashboard read paths through redis-py's cluster client: cursor pages with a post-filter, a flow's edges
read around chosen members."""

from __future__ import annotations

from ffcore.backend import Backend
from ffcore.execution import listing
from ffcore.execution.client import Client
from ffcore.flows.flows import Flows
from ffcore.flows.reads import read_flow, read_members
from ffcore.flows.topology import Topology


def test_filtered_cursor_pages_merge_partitions_on_every_node(cbackend: Backend):
    c = Client(cbackend)
    made = []
    for start in range(0, 140, 35):  # a batch shares one created time: runs of equal scores per partition
        made += c.create_many([{"kind": f"k{i % 3}", "lane": f"l{i % 12}"} for i in range(start, start + 35)])
    want = {r.execution_id for i, r in enumerate(made) if i % 3 == 1}
    seen, cursor = [], None
    while True:
        page = listing.list_executions(cbackend, listing.Query(kind="k1", limit=7, cursor=cursor), c.lanes())
        seen += [(r["created_at"], r["execution_id"]) for r in page.rows]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert {e for _, e in seen} == want and len(seen) == len(want)
    assert listing.total_created(cbackend, page.partitions) == 140


def test_a_flows_edges_around_members_read_through_the_cluster(cbackend: Backend):
    flows = Flows(cbackend)
    fid = flows.create()
    ids = [str(e) for e in flows.build(fid, [{"kind": f"k{i}"} for i in range(12)],
                                       edges=[(0, i) for i in range(1, 12)] + [(1, 2), (3, 4)])]
    whole = read_flow(cbackend, fid)
    members = read_members(cbackend, fid)
    assert whole is not None and members is not None and len(members.nodes) == 12
    topo = Topology(cbackend, flows.keys(fid))
    topo.expand([ids[0]])
    assert sorted(d for _, d in topo.out[ids[0]]) == sorted(ids[1:])
    shown = {ids[0], ids[1], ids[2], ids[3], ids[4]}
    among = topo.edges_among(shown)
    assert among == sorted((e.edge_id, e.upstream, e.downstream) for e in whole.edges
                           if e.upstream in shown and e.downstream in shown)
    assert set(topo.edge_states(among).values()) == {"unsatisfied"}
