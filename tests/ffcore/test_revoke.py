"""ff_revoke_lease (operator revocation) and the reclaim that follows it."""

import time

from ffcore import functions as F
from ffcore.execution.client import Client
from ffcore.ids import ExecutionId
from ffcore.keys import ExecKeys
from ffcore.worker.worker import Registry, Worker, WorkerConfig

from .invariants import (
    LANE,
    OTHER_WIID,
    WIID,
    attempt,
    check,
    claim,
    complete,
    create,
    history_events,
    raises,
    reclaim,
    zscore,
)


def test_revoking_a_lease_interrupts_the_attempt_without_finishing_it(backend):
    eid = create(backend)
    f = claim(backend, eid)
    reply = Client(backend).revoke_lease(eid, reason="maintenance")
    assert reply.fields == ["revoked", f.lease_id, "1"]
    c = check(backend, eid)
    k = ExecKeys(eid)
    assert c["lifecycle_phase"] == "active" and c["ownership_state"] == "lease_revoked"
    assert c["attempt_state"] == "attempt_interrupted" and c["blocking_reason"] == "waiting_for_worker"
    assert c["blocking_detail"] == "lease revoked: maintenance"
    assert c["lease_revoked_at"] and c["lease_revoke_reason"] == "maintenance"
    assert c["current_lease_id"] == f.lease_id  # not cleared by a revoke
    assert not backend.client.exists(k.lease_current)
    # The library drops it from I:lease_expiry; the client re-adds it as due now so reclaim finds it at once.
    assert zscore(backend, k.idx.lease_expiry, eid) <= backend.now_ms()
    assert not backend.client.sismember(k.idx.worker_leases(WIID), eid)
    assert zscore(backend, k.lane(LANE).active, eid) is not None
    ev = history_events(backend, eid)[-1]
    assert ev["event"] == "revoked" and ev["reason"] == "maintenance"


def test_a_second_revoke_is_already_satisfied(backend):
    eid = create(backend)
    claim(backend, eid)
    Client(backend).revoke_lease(eid)
    again = Client(backend).revoke_lease(eid)
    assert (again.status, again.fields) == ("ALREADY_SATISFIED", ["already_revoked"])
    check(backend, eid)


def test_revoking_an_expired_lease_is_already_satisfied(backend):
    eid = create(backend)
    claim(backend, eid, ttl_ms=100)
    time.sleep(0.15)
    backend.call(F.mark_lease_expired_if_due(ExecKeys(eid)))
    reply = Client(backend).revoke_lease(eid)
    assert (reply.status, reply.fields) == ("ALREADY_SATISFIED", ["already_expired"])
    assert check(backend, eid)["ownership_state"] == "lease_expired_reclaimable"


def test_a_revoke_naming_another_lease_is_stale(backend):
    eid = create(backend)
    f = claim(backend, eid)
    err = raises("stale_lease", lambda: Client(backend).revoke_lease(eid, expected_lease_id="not-it"))
    assert err.details == [f"expected not-it but current is {f.lease_id}"]
    assert check(backend, eid)["ownership_state"] == "leased"
    assert Client(backend).revoke_lease(eid, expected_lease_id=f.lease_id).fields[0] == "revoked"
    check(backend, eid)


def test_revoking_without_an_active_attempt_is_refused(backend):
    waiting = create(backend)
    assert raises("execution_not_active", lambda: Client(backend).revoke_lease(waiting)).details == ["none", "0"]
    check(backend, waiting)
    done = create(backend)
    complete(backend, done, claim(backend, done))
    assert raises("execution_not_active", lambda: Client(backend).revoke_lease(done)).details == ["success", "1"]
    check(backend, done)
    raises("execution_not_found", lambda: Client(backend).revoke_lease(ExecutionId.mint(7)))


def test_revoking_an_active_unowned_record_reports_no_active_lease(backend):
    # Not reachable through the lifecycle functions (active implies an owner); pins the guard.
    eid = create(backend)
    claim(backend, eid)
    backend.client.hset(ExecKeys(eid).core, "ownership_state", "unowned")
    raises("no_active_lease", lambda: Client(backend).revoke_lease(eid))


def test_a_revoked_execution_is_reclaimed_as_a_new_attempt(backend):
    eid = create(backend)
    old = claim(backend, eid)
    Client(backend).revoke_lease(eid)
    reply = reclaim(backend, eid)
    assert reply.fields[1] == "2" and reply.fields[4:] == ["1", "reclaim"]
    c = check(backend, eid)
    assert c["current_worker_instance_id"] == OTHER_WIID
    assert c["lease_revoked_at"] == "" and c["lease_revoke_reason"] == ""
    assert attempt(backend, eid, 0)["failure_reason"] == "lease_lease_revoked"
    assert attempt(backend, eid, 1)["reclaim_reason"] == "lease_lease_revoked"
    raises("stale_lease", lambda: complete(backend, eid, old))
    check(backend, eid)


def test_the_revoked_worker_learns_its_lease_is_gone(backend):
    create(backend)
    (task,) = Worker(backend, WorkerConfig(worker_instance_id="w-rv"), Registry()).claim_next(1)
    Client(backend).revoke_lease(task.execution_id)
    raises("lease_revoked", task.renew)
    assert task.lease_lost.is_set() and task.lost_reason == "lease_revoked"
    raises("lease_revoked", lambda: task.complete("x"))
    check(backend, task.execution_id)


def test_the_worker_reclaims_a_revoked_lease_at_once(backend):
    eid = create(backend)
    claim(backend, eid, ttl_ms=30_000)
    Client(backend).revoke_lease(eid)
    rescuer = Worker(backend, WorkerConfig(worker_instance_id="w-rescue"), Registry())
    (task,) = rescuer.reclaim(1)
    assert task.execution_id == eid and task.attempt_type == "reclaim" and task.lease_epoch == 2
    check(backend, eid)
