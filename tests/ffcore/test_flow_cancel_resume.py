"""Resumable flow cancel (v0.13): ff_cancel_flow's 5-KEYS shape records the owed member cancels, ff_ack_cancel_member
acknowledges them one by one, an interrupted cancel is resumed member by member, a bounded wait, a typed partial
result, and the stored reason on an already-terminal flow — on a real Valkey."""

from __future__ import annotations

import pytest

from ffcore import functions as F
from ffcore import keys
from ffcore.backend import Backend
from ffcore.engine.flow_scanners import CancelReconciler
from ffcore.errors import ERRORS
from ffcore.flows.cancel import drain_flow
from ffcore.flows.flows import Flows
from ffcore.keys import FlowKeys, PartitionKeys
from ffcore.reads import text
from tests.ffcore.flowkit import LANE, states, wait_until
from tests.keyspace import changed, keyspace


def _flow(backend: Backend, width: int = 6) -> tuple[Flows, str, list[str], int]:
    flows = Flows(backend)
    fid = flows.create()
    ids = [str(e) for e in flows.build(fid, [{"kind": f"m{i}", "lane": LANE} for i in range(width)])]
    return flows, fid, ids, flows.partition(fid)


def test_the_v013_cancel_records_every_member_as_owed_and_the_flow_on_the_backlog_in_one_call(backend: Backend):
    flows, fid, ids, n = _flow(backend)
    before = backend.now_ms()
    reply = backend.call(F.cancel_flow(n, fid, reason="stop", grace_ms=5000))
    assert reply.fields[0] == "cancel_all" and sorted(reply.fields[1:]) == sorted(ids)
    assert {text(m) for m in backend.client.smembers(keys.flow_pending_cancels(n, fid))} == set(ids)
    due = backend.client.zscore(keys.cancel_backlog(n), fid)
    assert due is not None and before + 5000 <= due <= backend.now_ms() + 5000
    assert set(states(flows, fid).values()) == {"waiting"}  # members are the dispatcher's job


def test_the_v020_shaped_cancel_writes_no_pending_set_and_no_backlog(backend: Backend):
    _, fid, _, n = _flow(backend, 2)
    backend.call(F.cancel_flow(n, fid, reason="stop"))
    assert backend.client.exists(keys.flow_pending_cancels(n, fid), keys.cancel_backlog(n)) == 0


@pytest.mark.parametrize("grace", ["-1", "1.5", "inf", "nan", "soon"])
def test_a_bad_grace_is_refused_before_anything_is_written(backend: Backend, grace: str):
    _, fid, _, n = _flow(backend, 2)
    fk = FlowKeys(n, fid)
    before = keyspace(backend)
    call = F.Call("ff_cancel_flow", [fk.core, fk.members, PartitionKeys(n).flow_index,
                                     keys.flow_pending_cancels(n, fid), keys.cancel_backlog(n)],
                  ["" + fid, "stop", "cancel_all", 0, grace])
    with pytest.raises(ERRORS["invalid_grace_ms"]):
        backend.call(call)
    assert changed(before, keyspace(backend)) == []


def test_ack_cancel_member_takes_the_flow_off_the_backlog_with_the_last_member(backend: Backend):
    _, fid, ids, n = _flow(backend, 2)
    backend.call(F.cancel_flow(n, fid, reason="stop", grace_ms=0))
    backend.call(F.ack_cancel_member(n, fid, ids[0]))
    assert backend.client.zscore(keys.cancel_backlog(n), fid) is not None
    assert backend.client.smembers(keys.flow_pending_cancels(n, fid)) == {ids[1].encode()}
    backend.call(F.ack_cancel_member(n, fid, ids[1]))
    backend.call(F.ack_cancel_member(n, fid, ids[1]))  # twice: harmless
    assert backend.client.zscore(keys.cancel_backlog(n), fid) is None


def test_a_cancel_interrupted_half_way_is_resumed_member_by_member_by_the_reconciler(backend: Backend):
    flows, fid, ids, n = _flow(backend, 7)
    backend.call(F.cancel_flow(n, fid, reason="halt", grace_ms=0))  # the flip happened; the dispatcher died
    first = drain_flow(backend, n, fid, limit=3)  # ... or got this far
    assert len(first.cancelled) == 3 and first.remaining == 4
    assert backend.client.zscore(keys.cancel_backlog(n), fid) is not None
    backend.client.zadd(keys.cancel_backlog(n), {fid: 0})
    rec = CancelReconciler(backend, grace_ms=0)
    assert rec.scan_partition(n, backend.now_ms()) == 4
    assert set(states(flows, fid).values()) == {"cancelled"}
    assert backend.client.exists(keys.flow_pending_cancels(n, fid)) == 0
    assert backend.client.zscore(keys.cancel_backlog(n), fid) is None
    assert rec.scan_partition(n, backend.now_ms()) == 0  # nothing cancelled twice


def test_a_wait_that_ends_with_failed_members_is_partially_cancelled_and_keeps_them_pending(backend: Backend):
    flows, fid, ids, n = _flow(backend, 4)
    bad = sorted(ids)[1]
    real = F.cancel_execution

    def broken(k, r, **kw):  # one member's cancel raises inside the library (a call short of its KEYS)
        call = real(k, r, **kw)
        return F.Call(call.function, call.keys[:3], call.args) if str(k.eid) == bad else call

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(F, "cancel_execution", broken)
        out = flows.cancel(fid, reason="partial", wait=True)
    assert out.status == "partially_cancelled" and out.failed == [bad]
    assert sorted(out.members) == sorted(ids) and out.report is not None and out.report.remaining == 1
    assert backend.client.smembers(keys.flow_pending_cancels(n, fid)) == {bad.encode()}
    retry = drain_flow(backend, n, fid)  # the retry (or the reconciler) acknowledges it
    assert retry.cancelled + retry.already_terminal == [bad] and retry.remaining == 0
    assert backend.client.zscore(keys.cancel_backlog(n), fid) is None


def test_a_wait_with_a_timeout_returns_scheduled_and_the_rest_is_cancelled_in_the_background(backend: Backend):
    flows, fid, ids, n = _flow(backend, 5)
    out = flows.cancel(fid, reason="bounded", wait=True, timeout_ms=0)
    assert out.status == "scheduled" and out.timed_out and out.report is not None and out.report.cancelled == []
    wait_until(lambda: set(states(flows, fid).values()) == {"cancelled"})
    wait_until(lambda: backend.client.zscore(keys.cancel_backlog(n), fid) is None)
    done = flows.cancel(fid, reason="again", wait=True, timeout_ms=10_000)
    assert done.status == "already_terminal"


def test_already_terminal_carries_the_stored_reason_and_policy(backend: Backend):
    flows, fid, ids, _ = _flow(backend, 3)
    first = flows.cancel(fid, reason="the first reason", wait=True)
    assert first.status == "cancelled" and first.reason is None
    again = flows.cancel(fid, reason="another", policy="cancel_flow_only")
    assert (again.status, again.policy, again.reason) == ("already_terminal", "cancel_all", "the first reason")
    assert sorted(again.members) == sorted(ids)
