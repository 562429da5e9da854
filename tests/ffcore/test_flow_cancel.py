"""cancel_flow: async with a durable backlog, wait mode, idempotent on a cancelled flow, exactly once per member."""

from __future__ import annotations

import pytest

from ffcore import keys
from ffcore.backend import Backend
from ffcore.engine.flow_scanners import CancelReconciler
from ffcore.errors import ERRORS, ExecutionNotActive
from ffcore.execution.client import Client
from ffcore.flows import cancel as flow_cancel
from ffcore.flows.cancel import cancel_flow, drain_flow
from ffcore.flows.flows import Flows
from ffcore.keys import ExecKeys
from ffcore.worker.worker import Registry, Worker, WorkerConfig
from tests.ffcore.flowkit import LANE, scanners, states, wait_until
from tests.ffcore.invariants import check, claim, complete


def _chain_with_finished_head(backend: Backend, flows: Flows, width: int = 6) -> tuple[str, list[str]]:
    """head (completed) -> width children (waiting) -> tail (blocked)."""
    fid = flows.create()
    ids = flows.build(fid, [{"kind": "head", "lane": LANE}] + [{"kind": f"c{i}", "lane": LANE} for i in range(width)]
                      + [{"kind": "tail", "lane": LANE}],
                      edges=[(0, i) for i in range(1, width + 1)] + [(i, width + 1) for i in range(1, width + 1)])
    f = claim(backend, ids[0], lane=LANE)
    complete(backend, ids[0], f)
    from ffcore.flows.dag import resolve_outgoing

    resolve_outgoing(backend, [(ids[0], fid, "success")])
    return fid, ids


def test_wait_mode_cancels_every_unfinished_member_and_leaves_finished_ones(backend: Backend):
    flows = Flows(backend)
    fid, ids = _chain_with_finished_head(backend, flows)
    out = flows.cancel(fid, reason="stop it", wait=True)
    assert out.status == "cancelled" and out.policy == "cancel_all"
    assert sorted(out.members) == sorted(ids)
    assert sorted(out.report.cancelled) == sorted(ids[1:])
    assert out.report.already_terminal == [ids[0]] and out.report.remaining == 0
    st = states(flows, fid)
    assert st[ids[0]] == "completed" and {st[e] for e in ids[1:]} == {"cancelled"}
    for e in ids:
        check(backend, e)
    n = flows.partition(fid)
    assert backend.client.zscore(keys.cancel_backlog(n), fid) is None
    assert backend.client.exists(keys.flow_pending_cancels(n, fid)) == 0
    core = flows.get(fid).core
    assert core["public_flow_state"] == "cancelled" and core["cancel_reason"] == "stop it"
    assert backend.client.hget(ExecKeys(ids[1]).core, "cancellation_reason").decode() == "stop it"


def test_async_mode_returns_at_once_and_the_dispatcher_finishes(backend: Backend):
    flows = Flows(backend)
    fid, ids = _chain_with_finished_head(backend, flows)
    out = flows.cancel(fid, reason="async")
    assert out.status == "scheduled" and len(out.members) == len(ids)
    wait_until(lambda: all(v in ("cancelled", "completed") for v in states(flows, fid).values()))
    n = flows.partition(fid)
    wait_until(lambda: backend.client.zscore(keys.cancel_backlog(n), fid) is None)


def test_cancelling_a_cancelled_flow_again_is_an_idempotent_no_op(backend: Backend):
    flows = Flows(backend)
    fid, ids = _chain_with_finished_head(backend, flows)
    flows.cancel(fid, reason="first", wait=True)
    before = flows.get(fid).core
    again = flows.cancel(fid, reason="second", policy="other", wait=True)
    assert again.status == "already_terminal" and again.policy == "cancel_all"
    assert sorted(again.members) == sorted(ids)
    assert flows.get(fid).core == before  # nothing written: reason, time and policy unchanged


def test_a_policy_other_than_cancel_all_leaves_members_running(backend: Backend):
    flows = Flows(backend)
    fid, ids = _chain_with_finished_head(backend, flows)
    out = flows.cancel(fid, reason="freeze", policy="cancel_flow_only")
    assert out.status == "cancelled" and out.report is None
    assert {states(flows, fid)[e] for e in ids[1:-1]} == {"waiting"}
    with pytest.raises(ERRORS["flow_already_terminal"]):
        flows.build(fid, [{"kind": "late"}])


def test_an_unknown_flow_is_refused(backend: Backend):
    with pytest.raises(ERRORS["flow_not_found"]):
        cancel_flow(backend, "00000000-0000-4000-8000-000000000000", reason="x")


def test_every_member_is_cancelled_exactly_once_when_the_dispatcher_and_a_worker_die_mid_cascade(backend: Backend):
    flows = Flows(backend)
    fid = flows.create()
    width = 20
    ids = flows.build(fid, [{"kind": "root", "lane": LANE}] + [{"kind": "leaf", "lane": LANE}] * width,
                      edges=[(0, i) for i in range(1, width + 1)])
    unfinished = ids[1:]
    c = Client(backend)
    with scanners(backend):
        f = claim(backend, ids[0], lane=LANE)
        complete(backend, ids[0], f)  # the listener releases the leaves
        wait_until(lambda: sum(v == "waiting" for v in states(flows, fid).values()) == width)
    # A worker claims three leaves and is killed: its leases stay behind, nobody renews or finishes them.
    dead = Worker(backend, WorkerConfig(lanes=(LANE,), worker_id="doomed"), Registry())
    held = wait_until(lambda: dead.claim_next(3))
    assert {c.get_state(t.execution_id) for t in held} == {"active"}
    n = flows.partition(fid)
    # The dispatcher dies after 5 members (wait mode with a dispatch cut short).
    with pytest.MonkeyPatch.context() as mp:
        real = flow_cancel.drain_flow
        mp.setattr(flow_cancel, "drain_flow", lambda b, n_, f_, **kw: real(b, n_, f_, limit=5, **kw))
        first = cancel_flow(backend, fid, reason="kill", wait=True)
    assert len(first.report.cancelled) + len(first.report.already_terminal) == 5
    assert first.report.remaining == width + 1 - 5
    assert backend.client.zscore(keys.cancel_backlog(n), fid) is not None  # the rest is durable
    # The cancel reconciler takes the overdue backlog over and finishes it.
    backend.client.zadd(keys.cancel_backlog(n), {fid: 0})
    rec = CancelReconciler(backend, batch=50, grace_ms=0)
    rec.tick()
    late = drain_flow(backend, n, fid)  # a dispatcher that comes back late finds nothing to do
    assert late.cancelled == [] and late.remaining == 0
    # Exactly once: the two passes cancelled disjoint sets that together are every unfinished member.
    assert rec.stats.acted + len(first.report.cancelled) == len(unfinished)
    st = states(flows, fid)
    assert st[ids[0]] == "completed" and {st[e] for e in unfinished} == {"cancelled"}
    for e in ids:
        check(backend, e)
    # The killed worker's leases are gone: a late completion is refused and the cancel stands.
    with pytest.raises(ExecutionNotActive):
        held[0].complete(b"too late")
    assert c.get_state(held[0].execution_id) == "cancelled"
    assert backend.client.zscore(keys.cancel_backlog(n), fid) is None
    assert backend.client.exists(keys.flow_pending_cancels(n, fid)) == 0
