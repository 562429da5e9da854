"""ff_cancel_execution from every non-terminal state, by operator and by the lease holder."""

from ffcore import functions as F
from ffcore.execution.client import Client
from ffcore.ids import ExecutionId, new_uuid
from ffcore.keys import ExecKeys
from ffcore.reads import core_refs
from ffcore.worker.worker import Registry, Worker, WorkerConfig

from .invariants import LANE, WIID, attempt, check, claim, complete, create, history_events, raises, zscore


def _worker_cancel(backend, eid, lease_id, lease_epoch):
    k = ExecKeys(eid)
    return backend.call(F.cancel_execution(k, core_refs(backend, k), reason="mine", source="worker",
                                           lease_id=lease_id, lease_epoch=lease_epoch))


def test_cancelling_a_waiting_execution_moves_it_to_terminal(backend):
    eid = create(backend, deadline_at=backend.now_ms() + 60_000)
    assert Client(backend).cancel(eid, reason="not needed").fields == ["cancelled", "runnable"]
    c = check(backend, eid)
    assert c["terminal_outcome"] == "cancelled" and c["public_state"] == "cancelled"
    assert c["cancellation_reason"] == "not needed" and c["cancelled_by"] == "operator_override"
    assert c["attempt_state"] == "pending_first_attempt"  # no attempt ever existed
    assert zscore(backend, ExecKeys(eid).idx.execution_deadline, eid) is None


def test_cancelling_a_delayed_execution_removes_it_from_the_delayed_set(backend):
    eid = create(backend, delay_until=backend.now_ms() + 60_000)
    Client(backend).cancel(eid, reason="x")
    assert check(backend, eid)["public_state"] == "cancelled"


def test_an_operator_cancel_of_an_active_execution_ends_the_attempt_and_lease(backend):
    eid = create(backend)
    f = claim(backend, eid, attempt_timeout_ms=60_000)
    assert Client(backend).cancel(eid, reason="abort").fields == ["cancelled", "active"]
    c = check(backend, eid)
    k = ExecKeys(eid)
    assert c["attempt_state"] == "attempt_terminal" and c["current_lease_id"] == ""
    a = attempt(backend, eid, 0)
    assert a["attempt_state"] == "ended_cancelled" and a["failure_reason"] == "cancelled: abort"
    assert not backend.client.sismember(k.idx.worker_leases(WIID), eid)
    assert zscore(backend, k.idx.attempt_timeout, eid) is None
    released = history_events(backend, eid)[-1]
    assert (released["event"], released["reason"], released["lease_id"]) == ("released", "cancelled", f.lease_id)


def test_the_lease_holder_can_cancel_with_its_own_lease(backend):
    eid = create(backend)
    f = claim(backend, eid)
    _worker_cancel(backend, eid, f.lease_id, str(f.lease_epoch))
    c = check(backend, eid)
    assert c["cancelled_by"] == "worker" and c["cancellation_reason"] == "mine"


def test_a_cancel_with_a_stale_lease_is_refused(backend):
    eid = create(backend)
    f = claim(backend, eid)
    raises("stale_lease", lambda: _worker_cancel(backend, eid, new_uuid(), str(f.lease_epoch)))
    raises("stale_lease", lambda: _worker_cancel(backend, eid, f.lease_id, "7"))
    assert check(backend, eid)["lifecycle_phase"] == "active"


def test_a_cancel_without_a_lease_id_skips_the_identity_check(backend):
    eid = create(backend)
    claim(backend, eid)
    _worker_cancel(backend, eid, "", "")
    assert check(backend, eid)["public_state"] == "cancelled"


def test_a_lease_holder_cancel_of_a_revoked_lease_is_refused_but_an_operator_may(backend):
    eid = create(backend)
    f = claim(backend, eid)
    Client(backend).revoke_lease(eid)
    raises("lease_revoked", lambda: _worker_cancel(backend, eid, f.lease_id, str(f.lease_epoch)))
    check(backend, eid)
    Client(backend).cancel(eid, reason="clean up")
    assert check(backend, eid)["public_state"] == "cancelled"


def test_cancelling_a_terminal_execution_reports_its_outcome_and_epoch(backend):
    eid = create(backend)
    complete(backend, eid, claim(backend, eid))
    err = raises("execution_not_active", lambda: Client(backend).cancel(eid, reason="late"))
    assert err.details == ["success", "1"]
    assert check(backend, eid)["public_state"] == "completed"


def test_cancelling_a_missing_execution_is_refused(backend):
    raises("execution_not_found", lambda: Client(backend).cancel(ExecutionId.mint(8), reason="x"))


def test_cancelling_an_execution_waiting_for_children_clears_the_blocked_set(backend):
    eid = create(backend)
    f = claim(backend, eid)
    backend.call(F.move_to_waiting_children(ExecKeys(eid), f))
    check(backend, eid)
    assert Client(backend).cancel(eid, reason="x").fields == ["cancelled", "runnable"]
    assert check(backend, eid)["public_state"] == "cancelled"


def test_the_task_cancel_cancels_through_its_lease(backend):
    create(backend)
    (task,) = Worker(backend, WorkerConfig(worker_instance_id="w-c"), Registry()).claim_next(1)
    task.cancel("handler gave up")
    c = check(backend, task.execution_id)
    assert c["public_state"] == "cancelled" and c["cancelled_by"] == "worker"
    assert task.consumed


def test_the_cancelled_lane_index_is_the_lane_of_the_execution(backend):
    eid = create(backend, lane="reports")
    Client(backend).cancel(eid, reason="x")
    check(backend, eid)
    assert zscore(backend, ExecKeys(eid).lane("reports").terminal, eid) is not None
    assert zscore(backend, ExecKeys(eid).lane(LANE).terminal, eid) is None
