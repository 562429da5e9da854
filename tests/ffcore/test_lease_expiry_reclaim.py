"""ff_mark_lease_expired_if_due, ff_issue_reclaim_grant and ff_reclaim_execution."""

import time

from ffcore import functions as F
from ffcore.engine.lease_expiry import LeaseExpiryScanner
from ffcore.ids import ExecutionId
from ffcore.keys import ExecKeys
from ffcore.policy import Policy
from ffcore.worker.worker import Registry, Worker, WorkerConfig

from .invariants import (
    LANE,
    OTHER_WIID,
    OTHER_WORKER,
    WIID,
    attempt,
    check,
    claim,
    claim_call,
    complete,
    create,
    grant,
    history_events,
    raises,
    reclaim,
    zscore,
)


def _mark(backend, eid):
    return backend.call(F.mark_lease_expired_if_due(ExecKeys(eid)))


def _expired(backend, ttl_ms=200):
    eid = create(backend)
    f = claim(backend, eid, ttl_ms=ttl_ms)
    time.sleep(ttl_ms / 1000 + 0.05)
    assert _mark(backend, eid).fields == ["marked_expired"]
    check(backend, eid)
    return eid, f


def _reclaim_grant(backend, eid, **kw):
    return backend.call(F.issue_reclaim_grant(ExecKeys(eid), lane=LANE, worker_id=OTHER_WORKER,
                                              worker_instance_id=OTHER_WIID, **kw))


# ------------------------------------------------------------------ marking
def test_a_lease_is_not_marked_before_it_expires(backend):
    eid = create(backend)
    claim(backend, eid)
    assert _mark(backend, eid).fields == ["not_yet_expired"]
    assert check(backend, eid)["ownership_state"] == "leased"


def test_a_due_lease_is_marked_expired_once(backend):
    eid, f = _expired(backend)
    c = check(backend, eid)
    assert c["ownership_state"] == "lease_expired_reclaimable"
    assert c["blocking_reason"] == "waiting_for_worker" and c["public_state"] == "active"
    assert c["current_lease_id"] == f.lease_id  # kept until the reclaim
    ev = history_events(backend, eid)[-1]
    assert ev["event"] == "expired" and ev["lease_id"] == f.lease_id
    assert zscore(backend, ExecKeys(eid).idx.lease_expiry, eid) is not None  # stays for the reclaimer
    assert _mark(backend, eid).status == "ALREADY_SATISFIED"
    assert _mark(backend, eid).fields == ["already_expired"]
    assert len(history_events(backend, eid)) == 2


def test_marking_is_a_no_op_for_revoked_finished_and_missing_executions(backend):
    eid = create(backend)
    claim(backend, eid)
    backend.call(F.revoke_lease(ExecKeys(eid), F.CoreRefs.from_core(check(backend, eid))))
    assert _mark(backend, eid).fields == ["already_revoked"]
    check(backend, eid)

    done = create(backend)
    complete(backend, done, claim(backend, done))
    k = ExecKeys(done)
    backend.client.zadd(k.idx.lease_expiry, {done: 1})
    assert _mark(backend, done).fields == ["not_active"]
    check(backend, done)  # and the stray index entry was removed

    missing = ExecutionId.mint(3)
    backend.client.zadd(ExecKeys(missing).idx.lease_expiry, {missing: 1})
    assert _mark(backend, missing).fields == ["execution_not_found"]
    assert zscore(backend, ExecKeys(missing).idx.lease_expiry, missing) is None


def test_marking_an_active_but_unowned_record_cleans_the_index(backend):
    # Not reachable through the lifecycle functions; the scanner must still not loop on it.
    eid = create(backend)
    claim(backend, eid)
    backend.client.hset(ExecKeys(eid).core, "ownership_state", "unowned")
    assert _mark(backend, eid).fields == ["unowned"]
    assert zscore(backend, ExecKeys(eid).idx.lease_expiry, eid) is None


# ------------------------------------------------------------------ reclaim
def test_an_expired_lease_is_reclaimed_as_a_new_attempt_with_the_next_epoch(backend):
    eid, old = _expired(backend)
    reply = reclaim(backend, eid, ttl_ms=10_000)
    lease_id, epoch, expires, attempt_id, index, kind = reply.fields
    assert (epoch, index, kind) == ("2", "1", "reclaim")
    c = check(backend, eid)
    k = ExecKeys(eid)
    assert c["ownership_state"] == "leased" and c["current_lease_id"] == lease_id
    assert c["current_worker_instance_id"] == OTHER_WIID and c["lease_reclaim_count"] == "1"
    assert c["lease_expired_at"] == "" and c["total_attempt_count"] == "2"
    assert int(c["lease_renewal_deadline"]) - int(c["lease_acquired_at"]) == 10_000 * 2 // 3
    assert not backend.client.exists(k.claim_grant)
    prev = attempt(backend, eid, 0)
    assert prev["attempt_state"] == "interrupted_reclaimed"
    assert prev["failure_reason"] == "lease_lease_expired_reclaimable"
    new = attempt(backend, eid, 1)
    assert new["attempt_type"] == "reclaim" and new["attempt_id"] == attempt_id
    assert new["reclaim_reason"] == "lease_lease_expired_reclaimable" and new["previous_attempt_index"] == "0"
    assert zscore(backend, k.lane(LANE).active, eid) == int(expires)
    ev = history_events(backend, eid)[-1]
    assert ev["event"] == "reclaimed" and ev["old_lease_epoch"] == "1" and ev["new_lease_epoch"] == "2"
    # the old holder is fenced out
    raises("stale_lease", lambda: complete(backend, eid, old))
    check(backend, eid)


def test_a_reclaim_of_a_leased_execution_is_refused(backend):
    eid = create(backend)
    claim(backend, eid)
    raises("execution_not_reclaimable", lambda: _reclaim_grant(backend, eid))
    raises("execution_not_reclaimable", lambda: reclaim(backend, eid, with_grant=False))
    check(backend, eid)


def test_a_reclaim_of_a_waiting_execution_is_refused(backend):
    eid = create(backend)
    raises("execution_not_reclaimable", lambda: _reclaim_grant(backend, eid))
    raises("execution_not_reclaimable", lambda: reclaim(backend, eid, with_grant=False))
    check(backend, eid)


def test_a_reclaim_needs_the_reclaimers_own_grant(backend):
    eid, _ = _expired(backend)
    raises("invalid_claim_grant", lambda: reclaim(backend, eid, with_grant=False))
    backend.call(F.issue_reclaim_grant(ExecKeys(eid), lane=LANE, worker_id="someone-else",
                                       worker_instance_id="x"))
    raises("invalid_claim_grant", lambda: reclaim(backend, eid, with_grant=False))
    assert check(backend, eid)["ownership_state"] == "lease_expired_reclaimable"


def test_a_second_reclaim_grant_is_refused(backend):
    eid, _ = _expired(backend)
    assert _reclaim_grant(backend, eid).fields == [eid]
    raises("grant_already_exists", lambda: _reclaim_grant(backend, eid))
    check(backend, eid)


def test_a_reclaim_grant_checks_capabilities_and_input(backend):
    eid = create(backend, policy=Policy(required_capabilities=("gpu",)))
    grant(backend, eid, capabilities_csv="gpu")
    backend.call(claim_call(eid, ttl_ms=100))
    time.sleep(0.15)
    _mark(backend, eid)
    err = raises("capability_mismatch", lambda: _reclaim_grant(backend, eid, capabilities_csv="cpu"))
    assert err.details == ["gpu"]
    assert check(backend, eid)["last_capability_mismatch_at"]
    raises("invalid_input", lambda: _reclaim_grant(backend, eid, grant_ttl_ms="x"))
    raises("execution_not_found", lambda: backend.call(F.issue_reclaim_grant(
        ExecKeys(ExecutionId.mint(2)), lane=LANE, worker_id="w", worker_instance_id="w")))


def test_a_reclaim_validates_its_ttl_and_the_execution(backend):
    eid, _ = _expired(backend)
    _reclaim_grant(backend, eid)
    raises("invalid_input", lambda: reclaim(backend, eid, ttl_ms="x", with_grant=False))
    raises("execution_not_found", lambda: reclaim(backend, ExecutionId.mint(6), with_grant=False))
    check(backend, eid)


def test_reclaiming_past_the_cap_fails_the_execution(backend):
    eid = create(backend, policy=Policy(max_reclaim_count=1))
    claim(backend, eid, ttl_ms=150)
    time.sleep(0.2)
    _mark(backend, eid)
    reclaim(backend, eid, ttl_ms=150)
    check(backend, eid)
    time.sleep(0.2)
    _mark(backend, eid)
    check(backend, eid)
    raises("max_retries_exhausted", lambda: reclaim(backend, eid))
    c = check(backend, eid)
    assert c["terminal_outcome"] == "failed" and c["failure_reason"] == "max_reclaims_exceeded"
    assert not backend.client.sismember(ExecKeys(eid).idx.worker_leases(OTHER_WIID), eid)


def test_the_worker_reclaims_an_expired_lease_end_to_end(backend):
    eid = create(backend)
    holder = Worker(backend, WorkerConfig(worker_id=OTHER_WORKER, worker_instance_id=WIID, lease_ttl_ms=300),
                    Registry())
    (lost,) = holder.claim_next(1)
    check(backend, eid)
    time.sleep(0.35)
    assert LeaseExpiryScanner(backend).tick() == 1
    check(backend, eid)
    rescuer = Worker(backend, WorkerConfig(worker_id="rescuer", worker_instance_id="rescuer-1"), Registry())
    (task,) = rescuer.reclaim(1)
    assert task.attempt_type == "reclaim" and task.attempt_index == 1
    assert task.lease_epoch == lost.lease_epoch + 1
    check(backend, eid)
    raises("stale_lease", lambda: lost.complete("late"))
    assert lost.lease_lost.is_set() and lost.lost_reason == "stale_lease"
    task.complete("rescued")
    c = check(backend, eid)
    assert c["public_state"] == "completed" and c["current_attempt_index"] == "1"


def test_the_worker_reclaim_marks_due_leases_itself(backend):
    eid = create(backend)
    claim(backend, eid, ttl_ms=200)
    time.sleep(0.25)
    (task,) = Worker(backend, WorkerConfig(worker_instance_id="r-2"), Registry()).reclaim(1)
    assert task.execution_id == eid and task.attempt_type == "reclaim"
    assert check(backend, eid)["current_worker_instance_id"] == "r-2"
