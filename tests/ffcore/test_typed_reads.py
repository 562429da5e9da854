"""Typed reads (#24 item 10): describe_execution's lease and current waitpoint, a flow's edge groups, one
edge, a member's edges by direction."""

from __future__ import annotations

import pytest

from ffcore.errors import InvalidInput
from ffcore.execution.client import Client
from ffcore.flows import reads as fr
from ffcore.flows.dag import resolve_outgoing
from ffcore.flows.flows import Flows
from ffcore.ids import new_uuid
from ffcore.reads import AttemptSummary, describe_execution
from ffcore.suspension.signals import Signals
from ffcore.worker.worker import Registry, Worker, WorkerConfig

from .suspension_support import claimed, signal, with_secrets


def test_the_snapshot_has_the_lease_while_a_worker_holds_it_and_none_after(backend):
    eid = Client(backend).create(kind="job", lane="snap", tags={"app.ticket": "42"}).execution_id
    before = describe_execution(backend, eid)
    assert before is not None
    assert (before.public_state, before.current_lease, before.current_attempt) == ("waiting", None, None)
    assert before.tags == {"app.ticket": "42"} and before.lane_id == "snap" and before.flow_id is None
    assert before.blocking_reason == "waiting_for_worker" and before.total_attempt_count == 0
    (task,) = Worker(backend, WorkerConfig(lanes=("snap",), worker_instance_id="w-snap"), Registry()).claim_next(1)
    held = describe_execution(backend, eid)
    assert held is not None and held.current_lease is not None
    lease = held.current_lease
    assert (lease.lease_id, lease.lease_epoch, lease.worker_instance_id, lease.attempt_index, lease.expires_at) == (
        task.lease_id, task.lease_epoch, "w-snap", task.attempt_index, task.lease_expires_at)
    assert held.current_attempt == AttemptSummary(task.attempt_id, task.attempt_index)
    assert held.public_state == "active" and held.total_attempt_count == 1
    renewed_to = task.renew()
    after_renew = describe_execution(backend, eid)
    assert after_renew is not None and after_renew.current_lease is not None
    assert after_renew.current_lease.expires_at == renewed_to
    assert after_renew.current_lease.last_heartbeat_at is not None
    assert after_renew.current_lease.last_heartbeat_at >= lease.last_heartbeat_at  # type: ignore[operator]
    task.complete("ok")
    done = describe_execution(backend, eid)
    assert done is not None and done.current_lease is None and done.public_state == "completed"
    assert done.last_mutation_at >= held.last_mutation_at
    assert describe_execution(backend, Client(backend).create_call(kind="x").args[0]) is None  # never created


def test_the_snapshot_names_the_current_waitpoint_while_suspended(backend):
    hb = with_secrets(backend)
    task = claimed(hb)
    out = task.suspend("approved", timeout_ms=600_000)
    snap = describe_execution(hb, task.execution_id)
    assert snap is not None and snap.public_state == "suspended" and snap.current_lease is None
    (open_wp,) = Signals(hb).pending_waitpoints(task.execution_id)
    assert snap.current_waitpoint == open_wp.waitpoint_id == out.waitpoint_id
    signal(hb, task.execution_id, out.waitpoint_id, out.token, "approved")
    resumed = describe_execution(hb, task.execution_id)
    assert resumed is not None and resumed.current_waitpoint is None and resumed.public_state == "waiting"


@pytest.fixture
def diamond(backend):
    """a -> c, b -> c, a -> d; returns (flow id, a, b, c, d, edge ids by (up, down))."""
    flows = Flows(backend)
    fid = flows.create()
    a, b, c, d = flows.build(fid, [{"kind": k, "lane": "dag"} for k in "abcd"])
    edges = {(a, c): flows.add_edge(fid, a, c, data_passing_ref="out-a"), (b, c): flows.add_edge(fid, b, c),
             (a, d): flows.add_edge(fid, a, d)}
    return fid, a, b, c, d, edges


def test_edges_by_direction_and_one_edge_read_what_was_staged(backend, diamond):
    fid, a, b, c, d, edges = diamond
    out_a = fr.list_edges(backend, fid, "outgoing", a)
    assert [(e.upstream_execution_id, e.downstream_execution_id) for e in out_a] == sorted(
        [(a, c), (a, d)], key=lambda p: edges[p])
    into_c = fr.list_edges(backend, fid, "incoming", c)
    assert sorted(e.edge_id for e in into_c) == sorted([edges[(a, c)], edges[(b, c)]])
    assert fr.list_edges(backend, fid, "incoming", a) == [] and fr.list_edges(backend, fid, "outgoing", c) == []
    one = fr.describe_edge(backend, fid, edges[(a, c)])
    assert one is not None
    assert (one.flow_id, one.upstream_execution_id, one.downstream_execution_id, one.data_passing_ref) == (
        fid, a, c, "out-a")
    assert (one.dependency_kind, one.satisfaction_condition, one.edge_state, one.created_by) == (
        "success_only", "all_required", "pending", "engine")
    assert one.created_at > 0 and one in out_a
    assert fr.describe_edge(backend, fid, new_uuid()) is None
    with pytest.raises(InvalidInput, match="direction"):
        fr.list_edges(backend, fid, "sideways", a)


def test_edge_groups_count_their_edges_as_upstreams_finish(backend, diamond):
    fid, a, b, c, d, _ = diamond
    Flows(backend).set_tags(fid, {"app.owner": "data-team"})
    snap = fr.describe_flow(backend, fid)
    assert snap is not None and snap.node_count == 4 and snap.edge_count == 3
    assert snap.tags == {"app.owner": "data-team"} and snap.public_flow_state == "open"
    groups = {g.downstream_execution_id: g for g in snap.edge_groups}
    assert set(groups) == {c, d}
    assert (groups[c].total_deps, groups[c].running_count, groups[c].group_state) == (2, 2, "pending")
    assert groups[c].policy == {"kind": "all_of"}
    worker = Worker(backend, WorkerConfig(lanes=("dag",), worker_instance_id="w-dag"), Registry())
    ready = {t.execution_id: t for t in worker.claim_next(4)}
    assert set(ready) == {a, b}
    ready[a].complete()
    ready[b].fail("no", "x")
    resolve_outgoing(backend, [(a, fid, "success"), (b, fid, "failed")])
    snap = fr.describe_flow(backend, fid)
    assert snap is not None
    groups = {g.downstream_execution_id: g for g in snap.edge_groups}
    g_c, g_d = groups[c], groups[d]
    assert (g_c.satisfied_count, g_c.failed_count, g_c.skipped_count, g_c.running_count, g_c.group_state) == (
        1, 1, 0, 0, "impossible")
    assert (g_d.satisfied_count, g_d.running_count, g_d.group_state) == (1, 0, "satisfied")
    assert fr.describe_flow(backend, new_uuid()) is None


def test_edge_group_policy_all_of_is_in_effect_once_edges_exist_and_a_change_is_refused(backend, diamond):
    from ffcore.errors import ERRORS
    from ffcore.flows.edge_groups import set_edge_group_policy
    from tests.keyspace import changed, keyspace

    fid, a, b, c, d, _ = diamond
    outsider = Client(backend).create(kind="x").execution_id
    before = keyspace(backend)
    assert set_edge_group_policy(backend, fid, c, {"kind": "all_of"}) == "already_set"
    for policy, word in (({"kind": "any_of", "on_satisfied": "let_run"}, "already_fixed"),
                         ({"kind": "quorum", "k": 2, "on_satisfied": "cancel_remaining"}, "already_fixed"),
                         ({"kind": "most_of"}, "policy.kind 'most_of'"), ({"kind": "all_of", "k": 1}, "policy.k"),
                         ("all_of", "policy must be an object")):
        with pytest.raises(InvalidInput, match=word):
            set_edge_group_policy(backend, fid, c, policy)
    with pytest.raises(ERRORS["flow_not_found"]):
        set_edge_group_policy(backend, new_uuid(), c, {"kind": "all_of"})
    with pytest.raises(ERRORS["execution_not_in_flow"]):
        set_edge_group_policy(backend, fid, outsider, {"kind": "all_of"})
    assert changed(before, keyspace(backend)) == []  # nothing written, accepted or refused
