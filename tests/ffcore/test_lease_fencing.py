"""Lease validation (contract §5.0 LV) of every lease-holder call, plus ff_renew_lease.

Each LV user (complete, fail, delay, move_to_waiting_children) must refuse a stale lease id, a wrong
epoch and a wrong attempt id (partial fence triples), a revoked or expired lease, and a finished
execution — the latter carrying the stored outcome and epoch.
"""

import dataclasses
import time

import pytest

from ffcore import functions as F
from ffcore.execution.client import Client
from ffcore.ids import ExecutionId, new_uuid
from ffcore.keys import ExecKeys

from .invariants import check, claim, complete, core, create, history_events, raises, zscore


def _complete(k, f):
    return F.complete_execution(k, f, b"r")


def _fail(k, f):
    return F.fail_execution(k, f, reason="x")


def _delay(k, f):
    return F.delay_execution(k, f, delay_until=10**13)


def _move(k, f):
    return F.move_to_waiting_children(k, f)


LV_USERS = pytest.mark.parametrize("build", [_complete, _fail, _delay, _move],
                                   ids=["complete", "fail", "delay", "move_to_waiting_children"])


def _claimed(backend, ttl_ms=30_000):
    eid = create(backend)
    return eid, claim(backend, eid, ttl_ms=ttl_ms)


@LV_USERS
@pytest.mark.parametrize("wrong", ["lease_id", "lease_epoch", "attempt_id"])
def test_it_rejects_a_partially_wrong_fence(backend, build, wrong):
    eid, f = _claimed(backend)
    bad = dataclasses.replace(f, **{wrong: f.lease_epoch + 1 if wrong == "lease_epoch" else new_uuid()})
    before = core(backend, eid)
    raises("stale_lease", lambda: backend.call(build(ExecKeys(eid), bad)))
    assert core(backend, eid) == before
    check(backend, eid)
    backend.call(build(ExecKeys(eid), f))  # the right fence still works
    check(backend, eid)


@LV_USERS
def test_it_reports_the_stored_outcome_and_epoch_when_not_active(backend, build):
    eid, f = _claimed(backend)
    complete(backend, eid, f)
    err = raises("execution_not_active", lambda: backend.call(build(ExecKeys(eid), f)))
    assert err.details == ["success", "1"]
    check(backend, eid)


@LV_USERS
def test_it_reports_a_cancelled_outcome_when_an_operator_cancelled(backend, build):
    eid, f = _claimed(backend)
    Client(backend).cancel(eid, reason="stop")
    err = raises("execution_not_active", lambda: backend.call(build(ExecKeys(eid), f)))
    assert err.details == ["cancelled", "1"]
    check(backend, eid)


@LV_USERS
def test_it_rejects_a_revoked_lease(backend, build):
    eid, f = _claimed(backend)
    Client(backend).revoke_lease(eid)
    raises("lease_revoked", lambda: backend.call(build(ExecKeys(eid), f)))
    assert check(backend, eid)["ownership_state"] == "lease_revoked"


@LV_USERS
def test_it_rejects_an_expired_lease_and_marks_it_expired(backend, build):
    eid, f = _claimed(backend, ttl_ms=200)
    time.sleep(0.25)
    raises("lease_expired", lambda: backend.call(build(ExecKeys(eid), f)))
    c = check(backend, eid)
    assert c["ownership_state"] == "lease_expired_reclaimable"
    assert c["attempt_state"] == "attempt_interrupted" and c["lease_expired_at"]
    assert c["blocking_detail"] == "lease expired, awaiting reclaim"
    assert history_events(backend, eid)[-1]["event"] == "expired"
    assert zscore(backend, ExecKeys(eid).idx.lease_expiry, eid) is not None


@LV_USERS
def test_expiry_is_checked_before_the_fence(backend, build):
    eid, f = _claimed(backend, ttl_ms=200)
    time.sleep(0.25)
    bad = dataclasses.replace(f, lease_id=new_uuid())
    raises("lease_expired", lambda: backend.call(build(ExecKeys(eid), bad)))
    check(backend, eid)


@LV_USERS
def test_it_reports_a_missing_execution(backend, build):
    eid = ExecutionId.mint(9)
    f = F.Fence(new_uuid(), 1, new_uuid(), 0, "w", "default")
    raises("execution_not_found", lambda: backend.call(build(ExecKeys(eid), f)))


# ------------------------------------------------------------------ ff_renew_lease
def _renew(backend, eid, f, ttl_ms=30_000, **kw):
    return backend.call(F.renew_lease(ExecKeys(eid), f, lease_ttl_ms=ttl_ms, **kw))


def test_a_renewal_extends_the_lease(backend):
    eid, f = _claimed(backend, ttl_ms=1000)
    k = ExecKeys(eid)
    active_before = zscore(backend, k.lane("default").active, eid)
    before = backend.now_ms()
    new_expires = int(_renew(backend, eid, f, ttl_ms=60_000)[0])
    assert before + 60_000 <= new_expires <= backend.now_ms() + 60_000
    c = check(backend, eid)
    assert c["lease_expires_at"] == str(new_expires)
    assert int(c["lease_renewal_deadline"]) - int(c["lease_last_renewed_at"]) == 40_000
    assert backend.client.hget(k.lease_current, "expires_at") == str(new_expires).encode()
    assert backend.client.pttl(k.lease_current) > 60_000  # expires_at + history grace
    assert zscore(backend, k.lane("default").active, eid) == active_before  # not moved
    assert [e["event"] for e in history_events(backend, eid)] == ["acquired"]


def test_a_renewed_lease_outlives_its_first_ttl(backend):
    eid, f = _claimed(backend, ttl_ms=200)
    time.sleep(0.1)
    _renew(backend, eid, f, ttl_ms=400)
    time.sleep(0.2)
    complete(backend, eid, f)  # would be lease_expired without the renewal
    assert check(backend, eid)["public_state"] == "completed"


@pytest.mark.parametrize("wrong", ["lease_id", "lease_epoch", "attempt_id", "attempt_index"])
def test_a_renewal_rejects_a_partially_wrong_fence(backend, wrong):
    eid, f = _claimed(backend)
    value = {"lease_id": new_uuid(), "attempt_id": new_uuid(), "lease_epoch": 2, "attempt_index": 1}[wrong]
    raises("stale_lease", lambda: _renew(backend, eid, dataclasses.replace(f, **{wrong: value})))
    check(backend, eid)


def test_a_renewal_after_completion_reports_the_outcome(backend):
    eid, f = _claimed(backend)
    complete(backend, eid, f)
    assert raises("execution_not_active", lambda: _renew(backend, eid, f)).details == ["success", "1"]


def test_a_renewal_of_a_revoked_lease_is_refused(backend):
    eid, f = _claimed(backend)
    Client(backend).revoke_lease(eid)
    raises("lease_revoked", lambda: _renew(backend, eid, f))
    check(backend, eid)


def test_a_renewal_of_an_expired_lease_marks_it_expired(backend):
    eid, f = _claimed(backend, ttl_ms=200)
    time.sleep(0.25)
    raises("lease_expired", lambda: _renew(backend, eid, f))
    assert check(backend, eid)["ownership_state"] == "lease_expired_reclaimable"


def test_a_renewal_validates_its_numbers_and_the_execution(backend):
    eid, f = _claimed(backend)
    call = F.renew_lease(ExecKeys(eid), f, lease_ttl_ms=1000)
    call.args[5] = "x"
    raises("invalid_input", lambda: backend.call(call))
    call = F.renew_lease(ExecKeys(eid), f, lease_ttl_ms=1000)
    call.args[6] = "y"
    raises("invalid_input", lambda: backend.call(call))
    raises("execution_not_found", lambda: _renew(backend, ExecutionId.mint(4), f))
    check(backend, eid)
