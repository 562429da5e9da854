"""Suspend and resume: one name, all of several, wildcard; duplicates; pending waitpoints; resumed claims."""

from __future__ import annotations

import pytest

from ffcore.errors import ERRORS
from ffcore.execution.client import Client
from ffcore.keys import ExecKeys
from ffcore.reads import decode_map
from ffcore.suspension.signals import APPENDED, BUFFERED, NO_OP, RESUMED, Signals
from ffcore.worker.task import TaskConsumed
from tests.ffcore.suspension_support import check, claim_again, claimed, core, signal, waitpoint


def test_one_named_signal_resumes_and_the_resumed_claim_sees_it(hb):
    t = claimed(hb)
    out = t.suspend("approved", timeout_ms=60_000, reason_code="waiting_for_approval")
    assert t.consumed and not out.already_satisfied
    c = check(hb, t.execution_id)
    assert (c["public_state"], c["blocking_reason"], c["current_waitpoint_id"]) == (
        "suspended", "waiting_for_approval", out.waitpoint_id)
    assert hb.client.zscore(ExecKeys(t.execution_id).idx.suspension_timeout, t.execution_id) is not None

    other = signal(hb, t.execution_id, out.waitpoint_id, out.token, "something_else")
    assert (other.effect, other.resumed) == (NO_OP, False)
    assert core(hb, t.execution_id)["public_state"] == "suspended"
    got = signal(hb, t.execution_id, out.waitpoint_id, out.token, "approved", payload=b'{"by": "ann"}',
                 source_identity="ann")
    assert got.resumed and got.effect == RESUMED
    c = check(hb, t.execution_id)
    assert (c["public_state"], c["attempt_state"], c["current_waitpoint_id"]) == ("waiting", "attempt_interrupted", "")
    assert waitpoint(hb, t.execution_id, out.waitpoint_id)["state"] == "closed"

    again = claim_again(hb, t.execution_id)
    assert (again.attempt_type, again.attempt_index, again.attempt_id) == ("resumed", t.attempt_index, t.attempt_id)
    assert again.lease_epoch == t.lease_epoch + 1
    [sig] = again.resume_signals()
    assert (sig.signal_name, sig.source_identity, sig.json()) == ("approved", "ann", {"by": "ann"})
    again.complete(b"done")
    assert check(hb, t.execution_id)["public_state"] == "completed"


def test_several_names_must_all_arrive(hb):
    t = claimed(hb)
    out = t.suspend(["legal", "finance"])
    assert signal(hb, t.execution_id, out.waitpoint_id, out.token, "finance").effect == APPENDED
    assert check(hb, t.execution_id)["public_state"] == "suspended"
    assert signal(hb, t.execution_id, out.waitpoint_id, out.token, "finance").effect == NO_OP  # already satisfied
    assert signal(hb, t.execution_id, out.waitpoint_id, out.token, "legal").resumed
    assert check(hb, t.execution_id)["public_state"] == "waiting"
    names = [s.signal_name for s in claim_again(hb, t.execution_id).resume_signals()]
    assert names == ["legal", "finance"]  # matcher order


@pytest.mark.parametrize("conditions", [None, []])
def test_no_names_means_any_signal_resumes(hb, conditions):
    t = claimed(hb)
    out = t.suspend(conditions)
    assert signal(hb, t.execution_id, out.waitpoint_id, out.token, "whatever").resumed
    assert check(hb, t.execution_id)["public_state"] == "waiting"


def test_a_duplicate_signal_by_idempotency_key_is_recorded_once(hb):
    t = claimed(hb)
    out = t.suspend(["a", "b"])
    first = signal(hb, t.execution_id, out.waitpoint_id, out.token, "a", idempotency_key="k-1")
    dup = signal(hb, t.execution_id, out.waitpoint_id, out.token, "a", idempotency_key="k-1")
    assert dup.duplicate and dup.signal_id == first.signal_id
    k = ExecKeys(t.execution_id)
    assert hb.client.zcard(k.signals) == 1
    assert waitpoint(hb, t.execution_id, out.waitpoint_id)["signal_count"] == "1"
    assert check(hb, t.execution_id)["public_state"] == "suspended"


def test_a_signal_buffered_on_a_pending_waitpoint_satisfies_a_later_suspend_and_the_lease_is_kept(hb):
    t = claimed(hb)
    pw = t.create_pending_waitpoint(expires_in_ms=60_000)
    assert pw.state == "pending" and pw.token.startswith("k1:")
    assert any(w.waitpoint_id == pw.waitpoint_id for w in Signals(hb).pending_waitpoints(t.execution_id))
    got = signal(hb, t.execution_id, pw.waitpoint_id, pw.token, "callback", payload=b'{"n": 1}')
    assert got.effect == BUFFERED
    assert check(hb, t.execution_id)["public_state"] == "active"

    out = t.suspend("callback", waitpoint=pw)
    assert out.already_satisfied and out.waitpoint_id == pw.waitpoint_id and out.token == pw.token
    assert [s.json() for s in out.signals] == [{"n": 1}]
    assert not t.consumed
    c = check(hb, t.execution_id)
    assert (c["public_state"], c["current_lease_id"]) == ("active", t.lease_id)
    assert waitpoint(hb, t.execution_id, pw.waitpoint_id)["state"] == "closed"
    assert hb.client.zscore(ExecKeys(t.execution_id).idx.pending_waitpoint_expiry, pw.waitpoint_id) is None
    t.complete(b"ok")  # the task is still live
    assert check(hb, t.execution_id)["public_state"] == "completed"


def test_a_pending_waitpoint_without_enough_signals_suspends_normally(hb):
    t = claimed(hb)
    pw = t.create_pending_waitpoint()
    signal(hb, t.execution_id, pw.waitpoint_id, pw.token, "one")
    out = t.suspend(["one", "two"], waitpoint=pw)
    assert not out.already_satisfied and t.consumed
    assert check(hb, t.execution_id)["public_state"] == "suspended"
    assert signal(hb, t.execution_id, pw.waitpoint_id, pw.token, "two").resumed
    names = [s.signal_name for s in claim_again(hb, t.execution_id).resume_signals()]
    assert names == ["one", "two"]


def test_a_refused_suspend_keeps_the_task_usable(hb):
    t = claimed(hb)
    pw = t.create_pending_waitpoint()
    Signals(hb).close_waitpoint(t.execution_id, pw.waitpoint_id)
    with pytest.raises(ERRORS["waitpoint_not_pending"]):
        t.suspend("x", waitpoint=pw)
    assert not t.consumed
    t.complete()
    with pytest.raises(TaskConsumed):
        t.suspend("x")
    with pytest.raises(ValueError):
        claimed(hb).suspend("x", timeout_behavior="explode")


def test_an_operator_resume_returns_it_to_waiting_without_signals(hb):
    t = claimed(hb)
    out = t.suspend("never", timeout_ms=60_000)
    assert Signals(hb).resume(t.execution_id) == "waiting"
    c = check(hb, t.execution_id)
    assert c["public_state"] == "waiting"
    assert waitpoint(hb, t.execution_id, out.waitpoint_id)["close_reason"] == "resumed"
    assert hb.client.zscore(ExecKeys(t.execution_id).idx.suspension_timeout, t.execution_id) is None
    assert claim_again(hb, t.execution_id).resume_signals() == []
    with pytest.raises(ERRORS["execution_not_suspended"]):
        Signals(hb).resume(t.execution_id)


def test_a_signal_after_the_resume_is_refused(hb):
    t = claimed(hb)
    out = t.suspend("go")
    signal(hb, t.execution_id, out.waitpoint_id, out.token, "go")
    with pytest.raises(ERRORS["target_not_signalable"]):
        signal(hb, t.execution_id, out.waitpoint_id, out.token, "go")


def test_cancelling_a_suspended_execution_closes_its_real_waitpoint(hb):
    t = claimed(hb)
    out = t.suspend("go", timeout_ms=60_000)
    Client(hb).cancel(t.execution_id, reason="no longer needed")
    c = check(hb, t.execution_id)
    assert c["public_state"] == "cancelled"
    wp = waitpoint(hb, t.execution_id, out.waitpoint_id)
    assert (wp["state"], wp["close_reason"]) == ("closed", "cancelled")
    k = ExecKeys(t.execution_id)
    cond = decode_map(hb.client.hgetall(k.idx.waitpoint_condition(out.waitpoint_id)))
    assert cond["closed"] == "1"
    assert hb.client.zscore(k.idx.suspension_timeout, t.execution_id) is None
    with pytest.raises(ERRORS["target_not_signalable"]):
        signal(hb, t.execution_id, out.waitpoint_id, out.token, "go")


def test_the_waitpoints_of_an_execution_are_listed_with_their_expected_names(hb):
    t = claimed(hb)
    pw = t.create_pending_waitpoint()
    out = t.suspend(["x", "y"])
    got = {w.waitpoint_id: w for w in Signals(hb).pending_waitpoints(t.execution_id)}
    assert got[out.waitpoint_id].state == "active"
    assert got[out.waitpoint_id].required_signal_names == ["x", "y"]
    assert got[out.waitpoint_id].waitpoint_token == out.token
    assert got[pw.waitpoint_id].state == "pending"


def test_a_running_worker_suspends_and_finishes_the_resumed_attempt(hb):
    import threading
    import time

    from ffcore.worker.worker import Registry, Worker, WorkerConfig

    reg = Registry()
    published: dict[str, tuple[str, str]] = {}

    @reg.handler("approve")
    def approve(task):
        if task.attempt_type == "resumed":
            return {"approved_by": task.resume_signals()[0].source_identity}
        out = task.suspend("approved", timeout_ms=60_000)
        published[task.execution_id] = (out.waitpoint_id, out.token)
        return None

    w = Worker(hb, WorkerConfig(lanes=("default",), worker_id="w", concurrency=2), reg)
    th = threading.Thread(target=w.run, kwargs={"install_signal_handlers": False}, daemon=True)
    th.start()
    try:
        eid = Client(hb).create(kind="approve").execution_id

        def wait(what, cond):
            deadline = time.monotonic() + 10
            while not cond():
                assert time.monotonic() < deadline, f"timed out waiting for {what}"
                time.sleep(0.01)

        wait("the suspension", lambda: eid in published and Client(hb).get_state(eid) == "suspended")
        assert not w.in_flight  # the suspended attempt freed its slot
        wid, token = published[eid]
        assert signal(hb, eid, wid, token, "approved", source_identity="ann").resumed
        wait("completion", lambda: Client(hb).get_state(eid) == "completed")
        assert Client(hb).get_result(eid) == b'{"approved_by":"ann"}'
        check(hb, eid)
    finally:
        w.stop()
        th.join(timeout=10)
