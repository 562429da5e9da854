"""Edge groups (v0.13): all_of / any_of / quorum(k) with on_satisfied, the edge-group record, sibling cancel with its
drain and reconcile functions, and the edge-cancel dispatcher and reconciler scanners — on a real Valkey."""

from __future__ import annotations

import pytest

from ffcore import functions as F
from ffcore import keys
from ffcore.backend import Backend
from ffcore.engine.flow_scanners import EdgeCancelDispatcher, EdgeCancelReconciler
from ffcore.errors import ERRORS, InvalidInput
from ffcore.execution.client import Client
from ffcore.flows.dag import resolve_outgoing
from ffcore.flows.flows import Flows
from ffcore.flows.reads import describe_flow
from ffcore.keys import ExecKeys, FlowKeys
from ffcore.reads import text
from tests.ffcore.flowkit import LANE, states
from tests.ffcore.invariants import check, claim, complete
from tests.keyspace import changed, keyspace

ANY_LET_RUN = {"kind": "any_of", "on_satisfied": "let_run"}


def _fan_in(backend: Backend, policy: dict[str, object], width: int = 3) -> tuple[Flows, str, list[str], str]:
    """`width` upstreams -> one child whose group has `policy`."""
    flows = Flows(backend)
    fid = flows.create()
    ids = flows.build(fid, [{"kind": f"u{i}", "lane": LANE} for i in range(width)] + [{"kind": "c", "lane": LANE}],
                      edges=[(i, width) for i in range(width)], groups={width: policy})
    return flows, fid, [str(e) for e in ids[:width]], str(ids[width])


def _succeed(backend: Backend, fid: str, eid: str) -> None:
    complete(backend, eid, claim(backend, eid, lane=LANE))
    resolve_outgoing(backend, [(eid, fid, "success")])


def _cancel(backend: Backend, fid: str, eid: str) -> None:
    Client(backend).cancel(eid, reason="test")
    resolve_outgoing(backend, [(eid, fid, "cancelled")])


def _group(backend: Backend, flows: Flows, fid: str, child: str) -> dict[str, str]:
    raw = backend.client.hgetall(FlowKeys(flows.partition(fid), fid).edgegroup(child))
    return {text(k): text(v) for k, v in raw.items()}


def test_an_all_of_child_gets_a_group_record_counted_as_its_edges_resolve(backend: Backend):
    flows, fid, (a, b), c = _fan_in(backend, {"kind": "all_of"}, width=2)
    g = _group(backend, flows, fid, c)
    assert (g["policy_variant"], g["n"], g["succeeded"], g["group_state"]) == ("all_of", "2", "0", "pending")
    _succeed(backend, fid, a)
    assert states(flows, fid)[c] == "waiting_children"
    _succeed(backend, fid, b)
    g = _group(backend, flows, fid, c)
    assert (g["succeeded"], g["group_state"]) == ("2", "satisfied") and states(flows, fid)[c] == "waiting"


def test_any_of_with_let_run_starts_the_child_at_the_first_success_and_lets_siblings_finish(backend: Backend):
    flows, fid, (a, b, d), c = _fan_in(backend, ANY_LET_RUN)
    _succeed(backend, fid, a)
    st = states(flows, fid)
    assert st[c] == "waiting" and st[b] == "waiting" and st[d] == "waiting"
    check(backend, c)
    _cancel(backend, fid, b)  # a later failure only counts: the group fired once
    g = _group(backend, flows, fid, c)
    assert (g["group_state"], g["succeeded"], g["failed"]) == ("satisfied", "1", "1")
    assert "cancel_siblings_pending_flag" not in g and states(flows, fid)[c] == "waiting"
    snap = describe_flow(backend, fid)
    assert snap is not None
    grp = {x.downstream_execution_id: x for x in snap.edge_groups}[c]
    assert grp.policy == ANY_LET_RUN and (grp.satisfied_count, grp.failed_count, grp.running_count) == (1, 1, 1)
    assert grp.group_state == "satisfied"


def test_quorum_with_cancel_remaining_starts_the_child_and_cancels_the_running_sibling(backend: Backend):
    flows, fid, (a, b, d), c = _fan_in(backend, {"kind": "quorum", "k": 2, "on_satisfied": "cancel_remaining"})
    _succeed(backend, fid, a)
    assert states(flows, fid)[c] == "waiting_children"
    _succeed(backend, fid, b)
    st = states(flows, fid)
    assert st[c] == "waiting" and st[d] == "cancelled"
    n = flows.partition(fid)
    g = _group(backend, flows, fid, c)
    assert g["group_state"] == "satisfied" and g["cancel_siblings_reason"] == "sibling_quorum_satisfied"
    assert "cancel_siblings_pending_flag" not in g  # drained
    assert backend.client.smembers(keys.pending_cancel_groups(n)) == set()
    assert {text(x) for x in backend.client.smembers(FlowKeys(n, fid).edgegroup_cancelled(c))} == {d}
    snap = describe_flow(backend, fid)
    assert snap is not None
    grp = {x.downstream_execution_id: x for x in snap.edge_groups}[c]
    assert grp.cancelled_siblings == [d]
    check(backend, d)


def test_a_quorum_that_can_no_longer_be_reached_skips_the_child_and_cancels_the_rest(backend: Backend):
    flows, fid, (a, b, d), c = _fan_in(backend, {"kind": "quorum", "k": 2, "on_satisfied": "cancel_remaining"})
    _cancel(backend, fid, a)
    assert states(flows, fid)[c] == "waiting_children"  # 2 of the 2 left may still succeed
    _cancel(backend, fid, b)
    st = states(flows, fid)
    assert st[c] == "skipped" and st[d] == "cancelled"
    g = _group(backend, flows, fid, c)
    assert (g["group_state"], g["failed"], g["cancel_siblings_reason"]) == (
        "impossible", "2", "sibling_quorum_impossible")


def test_the_policy_is_validated_by_field_and_fixed_once_edges_exist(backend: Backend):
    flows = Flows(backend)
    fid = flows.create()
    a, c = (str(x) for x in flows.build(fid, [{"kind": "a", "lane": LANE}, {"kind": "c", "lane": LANE}]))
    before = keyspace(backend)
    for policy, word in (({"kind": "any_of"}, "policy.on_satisfied"),
                         ({"kind": "quorum", "on_satisfied": "let_run"}, "policy.k"),
                         ({"kind": "quorum", "k": 0, "on_satisfied": "let_run"}, "policy.k"),
                         ({"kind": "any_of", "on_satisfied": "maybe"}, "policy.on_satisfied"),
                         ({"kind": "all_of", "k": 1}, "policy.k"), ({"kind": "most_of"}, "policy.kind"),
                         ("all_of", "policy must be an object")):
        with pytest.raises(InvalidInput, match=word):
            flows.set_edge_group_policy(fid, c, policy)
    assert changed(before, keyspace(backend)) == []
    assert flows.set_edge_group_policy(fid, c, ANY_LET_RUN) == "set"
    assert flows.set_edge_group_policy(fid, c, ANY_LET_RUN) == "already_set"
    flows.add_edge(fid, a, c)
    with pytest.raises(InvalidInput, match="already_fixed"):
        flows.set_edge_group_policy(fid, c, {"kind": "all_of"})
    with pytest.raises(ERRORS["execution_not_in_flow"]):
        flows.set_edge_group_policy(fid, str(Client(backend).create(kind="x").execution_id), ANY_LET_RUN)
    before = keyspace(backend)
    with pytest.raises(InvalidInput, match="already_fixed"):  # refused before the batch writes anything
        flows.build(fid, [{"kind": "d", "lane": LANE}], edges=[(0, c)], groups={c: ANY_LET_RUN})
    assert changed(before, keyspace(backend)) == []


def test_the_dispatcher_scanner_cancels_what_a_resolve_queued_and_drains_the_group(backend: Backend):
    flows, fid, (a, b, d), c = _fan_in(backend, {"kind": "any_of", "on_satisfied": "cancel_remaining"})
    complete(backend, a, claim(backend, a, lane=LANE))
    # The library call alone (as an upstream engine or a crashed resolver leaves it): queued, nobody cancelled.
    edge = next(iter(backend.client.smembers(FlowKeys(flows.partition(fid), fid).outgoing(a))))
    backend.call(F.resolve_dependency(ExecKeys(c), lane=LANE, attempt_index=0, edge_id=text(edge), upstream=a,
                                      outcome="success", now_ms=backend.now_ms(), flow_id=fid))
    n = flows.partition(fid)
    assert backend.client.smembers(keys.pending_cancel_groups(n)) == {f"{fid}|{c}".encode()}
    assert set(_group(backend, flows, fid, c)["cancel_siblings_pending_members"].split("|")) == {b, d}
    assert EdgeCancelDispatcher(backend).scan_partition(n, backend.now_ms()) == 3  # 2 cancels + 1 drain
    st = states(flows, fid)
    assert (st[b], st[d], st[c]) == ("cancelled", "cancelled", "waiting")
    assert backend.client.scard(keys.pending_cancel_groups(n)) == 0


def test_the_reconciler_clears_stale_and_finished_groups_and_leaves_running_ones(backend: Backend):
    flows, fid, (a, b, d), c = _fan_in(backend, {"kind": "any_of", "on_satisfied": "cancel_remaining"})
    n = flows.partition(fid)
    fk, pending = FlowKeys(n, fid), keys.pending_cancel_groups(n)
    rec = EdgeCancelReconciler(backend)
    # A group whose listed sibling still runs: the dispatcher's, left alone.
    backend.client.hset(fk.edgegroup(c), mapping={"cancel_siblings_pending_flag": "true",
                                                  "cancel_siblings_pending_members": f"{b}|{d}"})
    backend.client.sadd(pending, f"{fid}|{c}")
    assert rec.scan_partition(n, 0) == 0 and backend.client.sismember(pending, f"{fid}|{c}")
    # Its cancels landed but the drain never ran: finished.
    Client(backend).cancel(b, reason="t")
    Client(backend).cancel(d, reason="t")
    assert rec.scan_partition(n, 0) == 1
    assert not backend.client.sismember(pending, f"{fid}|{c}")
    assert "cancel_siblings_pending_flag" not in _group(backend, flows, fid, c)
    # A tuple without a flag (drain half-done) or without a group: dropped.
    backend.client.sadd(pending, f"{fid}|{c}", f"{fid}|{a}")
    assert rec.scan_partition(n, 0) == 2 and backend.client.scard(pending) == 0


def test_a_v020_shaped_resolve_ignores_the_group_and_behaves_as_all_of(backend: Backend):
    flows, fid, (a, b), c = _fan_in(backend, ANY_LET_RUN, width=2)
    complete(backend, a, claim(backend, a, lane=LANE))
    edge = next(iter(backend.client.smembers(FlowKeys(flows.partition(fid), fid).outgoing(a))))
    r = backend.call(F.resolve_dependency(ExecKeys(c), lane=LANE, attempt_index=0, edge_id=text(edge), upstream=a,
                                          outcome="success", now_ms=backend.now_ms()))
    assert r.fields[:1] == ["satisfied"] and states(flows, fid)[c] == "waiting_children"
    assert _group(backend, flows, fid, c)["succeeded"] == "0"


def test_the_fast_path_leaves_an_any_of_child_to_the_resolver_and_counts_an_all_of_one(backend: Backend):
    from tests.ffcore.invariants import LANE as FAST_LANE
    from tests.ffcore.test_fastpath_flows import fast_complete

    flows = Flows(backend)
    fid = flows.create()
    up, any_child, all_child = (str(e) for e in flows.build(
        fid, [{"kind": k, "lane": FAST_LANE} for k in ("up", "any", "all")],
        edges=[(0, 1), (0, 2)], groups={1: ANY_LET_RUN}))
    fast_complete(backend, up, claim(backend, up), n=0)
    assert states(flows, fid)[any_child] == "waiting_children"  # the group decides, in ff_resolve_dependency
    g = _group(backend, flows, fid, all_child)
    assert (states(flows, fid)[all_child], g["succeeded"], g["group_state"]) == ("waiting", "1", "satisfied")
    resolve_outgoing(backend, [(up, fid, "success")])  # what the completion listener runs
    assert states(flows, fid)[any_child] == "waiting"
    assert _group(backend, flows, fid, any_child)["group_state"] == "satisfied"


def test_ffscanners_runs_the_edge_cancel_dispatcher_and_reconciler(backend: Backend, monkeypatch):
    from ffcore.engine.flow_scanners import scanners

    monkeypatch.setenv("FF_SCAN_EDGE_CANCEL_MS", "250")
    by_name = {s.name: s for s in scanners(backend)}
    assert by_name["edge_cancel_dispatcher"].interval_ms == 250
    assert by_name["edge_cancel_reconciler"].interval_ms == 15000


def test_replaying_a_member_its_quorum_skipped_reopens_the_group(backend: Backend):
    flows, fid, (a, b, d), c = _fan_in(backend, {"kind": "quorum", "k": 2, "on_satisfied": "let_run"})
    _cancel(backend, fid, a)
    _cancel(backend, fid, b)
    assert states(flows, fid)[c] == "skipped"
    flows.replay(c)
    g = _group(backend, flows, fid, c)
    assert (g["group_state"], g["succeeded"], g["failed"], g["n"]) == ("pending", "0", "0", "3")
    assert states(flows, fid)[c] == "waiting_children"
    for up in (a, b):
        flows.replay(up)
        _succeed(backend, fid, up)
    assert states(flows, fid)[c] == "waiting" and _group(backend, flows, fid, c)["succeeded"] == "2"


def test_with_real_workers_the_first_two_of_three_mirrors_start_the_merge_and_the_third_is_cancelled(
        backend: Backend):
    import threading

    from ffcore.worker.worker import Registry
    from tests.ffcore.flowkit import scanners, wait_until, workers

    flows = Flows(backend)
    fid = flows.create(kind="mirrors")
    *mirrors, merge = (str(e) for e in flows.build(
        fid, [{"kind": "fast", "lane": LANE}, {"kind": "fast", "lane": LANE}, {"kind": "slow", "lane": LANE},
              {"kind": "merge", "lane": LANE}],
        edges=[(0, 3), (1, 3), (2, 3)], groups={3: {"kind": "quorum", "k": 2, "on_satisfied": "cancel_remaining"}}))
    release = threading.Event()
    reg = Registry()

    @reg.handler("*")
    def run(task):
        if task.kind == "slow":
            release.wait(10)  # a straggler: still running when the quorum is met
        return {"kind": task.kind}

    try:
        with scanners(backend, EdgeCancelDispatcher(backend, interval_ms=200)), workers(backend, reg):
            wait_until(lambda: states(flows, fid)[merge] == "completed")
            st = states(flows, fid)
            assert [st[m] for m in mirrors] == ["completed", "completed", "cancelled"]
            release.set()
    finally:
        release.set()
    snap = describe_flow(backend, fid)
    assert snap is not None
    grp = {x.downstream_execution_id: x for x in snap.edge_groups}[merge]
    assert grp.group_state == "satisfied" and grp.cancelled_siblings == [mirrors[2]]
