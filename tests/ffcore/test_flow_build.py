"""Building flows: members on the flow's partition, edges staged and applied atomically, whole-flow reads."""

from __future__ import annotations

import pytest

from ffcore import functions as F
from ffcore.backend import Backend
from ffcore.errors import ERRORS
from ffcore.execution.client import Client
from ffcore.flows.flows import EdgeSpec, Flows, PartitionMismatch
from ffcore.flows.reads import list_flows
from ffcore.ids import ExecutionId
from ffcore.keys import ExecKeys, FlowKeys
from tests.ffcore.flowkit import LANE
from tests.ffcore.invariants import check
from tests.ffcore.roundtrips import counting_pipelines


def test_members_are_minted_on_the_flow_partition_and_children_wait_for_their_edges(backend: Backend):
    flows = Flows(backend)
    fid = flows.create(kind="etl")
    a, b, c = flows.build(fid, [{"kind": "a", "lane": LANE}, {"kind": "b", "lane": LANE}, {"kind": "c", "lane": LANE}],
                          edges=[(0, 1), (1, 2)])
    n = flows.partition(fid)
    assert {a.partition_index, b.partition_index, c.partition_index} == {n}
    st = Client(backend)
    assert st.get_state(a) == "waiting"
    assert st.get_state(b) == "waiting_children"
    assert st.get_state(c) == "waiting_children"
    for e in (a, b, c):
        check(backend, e)
        assert backend.client.hget(ExecKeys(e).core, "flow_id").decode() == fid
    core = backend.client.hgetall(FlowKeys(n, fid).core)
    assert core[b"node_count"] == b"3" and core[b"edge_count"] == b"2"
    assert core[b"graph_revision"] == b"5"  # 3 adds + 2 stages


def test_a_member_from_another_partition_is_refused_with_a_clear_error(backend: Backend):
    flows = Flows(backend)
    fid = flows.create()
    other = (flows.partition(fid) + 1) % backend.settings.partitions.flow
    stranger = Client(backend).create(kind="x", execution_id=ExecutionId.mint(other)).execution_id
    with pytest.raises(PartitionMismatch, match="minted for the flow"):
        flows.add_execution(fid, stranger)
    assert flows.get(fid).nodes == []


def test_an_existing_execution_minted_for_the_flow_joins_it(backend: Backend):
    flows = Flows(backend)
    fid = flows.create()
    eid = Client(backend).create(kind="x", execution_id=flows.mint(fid)).execution_id
    assert flows.add_execution(fid, eid) == 1
    assert flows.add_execution(fid, eid) == 1  # already a member: idempotent
    assert [n.eid for n in flows.get(fid).nodes] == [eid]


def test_a_cycle_is_refused_and_nothing_is_applied(backend: Backend):
    flows = Flows(backend)
    fid = flows.create()
    a, b = flows.build(fid, [{"kind": "a"}, {"kind": "b"}], edges=[(0, 1)])
    with pytest.raises(ERRORS["cycle_detected"]):
        flows.add_edge(fid, b, a)
    assert Client(backend).get_state(a) == "waiting"
    assert len(flows.get(fid).edges) == 1


def test_a_self_edge_and_an_unknown_flow_are_refused_before_any_write(backend: Backend):
    flows = Flows(backend)
    fid = flows.create()
    (a,) = flows.build(fid, [{"kind": "a"}])
    with pytest.raises(ERRORS["self_referencing_edge"]):
        flows.add_edge(fid, a, a)
    with pytest.raises(ERRORS["flow_not_found"]):
        flows.build("00000000-0000-4000-8000-000000000000", [{"kind": "a"}])


def test_adding_an_edge_to_a_waiting_member_parks_it(backend: Backend):
    flows = Flows(backend)
    fid = flows.create()
    a, b = flows.build(fid, [{"kind": "a"}, {"kind": "b"}])
    assert Client(backend).get_state(b) == "waiting"
    edge = flows.add_edge(fid, a, b, data_passing_ref="result")
    assert Client(backend).get_state(b) == "waiting_children"
    check(backend, b)
    g = flows.get(fid)
    assert [(e.edge_id, e.upstream, e.downstream, e.state, e.data_passing_ref) for e in g.edges] == [
        (edge, a, b, "unsatisfied", "result")]


def test_a_whole_flow_is_read_in_three_round_trips(backend: Backend):
    flows = Flows(backend)
    fid = flows.create()
    members = [{"kind": f"k{i}"} for i in range(60)]
    edges = [EdgeSpec(0, i) for i in range(1, 60)] + [EdgeSpec(i, 59) for i in range(1, 59)]
    flows.build(fid, members, edges)
    with counting_pipelines(backend) as trips:
        g = flows.get(fid)
    assert len(trips) == 3
    assert len(g.nodes) == 60 and len(g.edges) == 59 + 58
    assert g.counts == {"waiting": 1, "waiting_children": 59}
    assert g.revision == str(60 + 117)


def test_summary_and_the_list_count_members_by_state_newest_first(backend: Backend):
    flows = Flows(backend)
    old = flows.create(kind="old")
    flows.build(old, [{"kind": "a"}, {"kind": "b"}], edges=[(0, 1)])
    new = flows.create(kind="new")
    flows.build(new, [{"kind": "a"}])
    assert flows.summary(old) == {"waiting": 1, "waiting_children": 1}
    page = list_flows(backend, limit=1)
    assert [r.flow_id for r in page.rows] == [new] and page.next_cursor
    page2 = list_flows(backend, cursor=page.next_cursor, limit=1)
    assert [r.flow_id for r in page2.rows] == [old]
    assert page2.rows[0].counts == {"waiting": 1, "waiting_children": 1}
    assert page2.rows[0].total == 2


def test_evaluate_and_promote_follow_the_dependency_counts(backend: Backend):
    flows = Flows(backend)
    fid = flows.create()
    a, b = flows.build(fid, [{"kind": "a"}, {"kind": "b"}], edges=[(0, 1)])
    kb = ExecKeys(b)
    assert backend.call(F.evaluate_flow_eligibility(kb)).fields == ["blocked_by_dependencies"]
    with pytest.raises(ERRORS["deps_not_satisfied"]):
        backend.call(F.promote_blocked_to_eligible(kb, lane="default", now_ms=backend.now_ms()))
    assert backend.call(F.evaluate_flow_eligibility(ExecKeys(a))).fields == ["eligible"]
