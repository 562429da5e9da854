"""ff_issue_claim_grant and ff_claim_execution: the fresh-claim path and every refusal."""

import time

import pytest
import redis

from ffcore.execution.client import Client
from ffcore.ids import ExecutionId
from ffcore.keys import ExecKeys
from ffcore.policy import Policy
from ffcore.worker.worker import Registry, Worker, WorkerConfig

from .invariants import (
    LANE,
    OTHER_WORKER,
    WIID,
    WORKER,
    attempt,
    check,
    claim,
    claim_call,
    complete,
    core,
    create,
    grant,
    history_events,
    raises,
    zscore,
)


# ------------------------------------------------------------------ grants
def test_a_grant_is_stored_with_a_ttl_and_leaves_the_execution_eligible(backend):
    eid = create(backend)
    before = backend.now_ms()
    assert grant(backend, eid, grant_ttl_ms=5000).fields == [eid]
    k = ExecKeys(eid)
    g = {a.decode(): b.decode() for a, b in backend.client.hgetall(k.claim_grant).items()}
    assert g["worker_id"] == WORKER and g["worker_instance_id"] == WIID and g["lane_id"] == LANE
    assert int(g["grant_expires_at"]) - int(g["created_at"]) == 5000 and int(g["created_at"]) >= before
    assert 0 < backend.client.pttl(k.claim_grant) <= 5000
    check(backend, eid)


def test_a_grant_for_a_missing_execution_is_refused(backend):
    raises("execution_not_found", lambda: grant(backend, ExecutionId.mint(1)))


def test_a_second_grant_is_refused_while_the_first_is_unconsumed(backend):
    eid = create(backend)
    grant(backend, eid)
    raises("grant_already_exists", lambda: grant(backend, eid, worker_id=OTHER_WORKER))
    check(backend, eid)


def test_a_grant_is_refused_for_an_execution_that_is_not_runnable(backend):
    eid = create(backend)
    claim(backend, eid)
    raises("execution_not_eligible", lambda: grant(backend, eid))
    check(backend, eid)


def test_a_grant_is_refused_for_a_delayed_execution(backend):
    eid = create(backend, delay_until=backend.now_ms() + 60_000)
    raises("execution_not_eligible", lambda: grant(backend, eid))
    check(backend, eid)


def test_a_grant_is_refused_when_the_execution_is_not_in_that_lanes_eligible_set(backend):
    eid = create(backend)
    raises("execution_not_in_eligible_set", lambda: grant(backend, eid, lane="elsewhere"))
    assert not backend.client.exists(ExecKeys(eid).claim_grant)
    check(backend, eid)


def test_a_grant_is_refused_on_a_capability_mismatch_and_stamps_the_core(backend):
    eid = create(backend, policy=Policy(required_capabilities=("gpu", "arm64", "ssd")))
    err = raises("capability_mismatch", lambda: grant(backend, eid, capabilities_csv="ssd"))
    assert err.details == ["arm64,gpu"]
    c = check(backend, eid)  # still eligible
    assert c["last_capability_mismatch_at"]
    assert grant(backend, eid, capabilities_csv="arm64,gpu,ssd,x86").status == "OK"


def test_an_execution_without_requirements_matches_any_worker(backend):
    eid = create(backend)
    assert grant(backend, eid, capabilities_csv="").status == "OK"


@pytest.mark.parametrize(("caps", "detail"), [
    (",".join(f"c{i}" for i in range(257)), "worker:too_many_tokens"),
    ("x" * 4097, "worker:too_many_bytes"),
])
def test_a_grant_rejects_oversized_worker_capabilities(backend, caps, detail):
    eid = create(backend)
    err = raises("invalid_capabilities", lambda: grant(backend, eid, capabilities_csv=caps))
    assert err.details == [detail]


def test_a_grant_rejects_a_non_numeric_ttl(backend):
    eid = create(backend)
    raises("invalid_input", lambda: grant(backend, eid, grant_ttl_ms="soon"))


# ------------------------------------------------------------------ claims
def test_a_claim_creates_attempt_zero_with_a_lease_of_epoch_one(backend):
    eid = create(backend)
    grant(backend, eid)
    before = backend.now_ms()
    reply = backend.call(claim_call(eid, ttl_ms=10_000, lease_id="11111111-1111-4111-8111-111111111111",
                                    attempt_id="22222222-2222-4222-8222-222222222222"))
    lease_id, epoch, expires, attempt_id, index, kind = reply.fields
    assert (lease_id, epoch, attempt_id, index, kind) == (
        "11111111-1111-4111-8111-111111111111", "1", "22222222-2222-4222-8222-222222222222", "0", "initial")
    assert before + 10_000 <= int(expires) <= backend.now_ms() + 10_000
    c = check(backend, eid)
    k = ExecKeys(eid)
    assert c["lifecycle_phase"] == "active" and c["ownership_state"] == "leased"
    assert c["eligibility_state"] == "not_applicable" and c["public_state"] == "active"
    assert c["current_attempt_index"] == "0" and c["total_attempt_count"] == "1"
    assert c["current_worker_id"] == WORKER and c["current_worker_instance_id"] == WIID
    assert c["started_at"] and c["lease_expires_at"] == expires
    assert int(c["lease_renewal_deadline"]) - int(c["lease_acquired_at"]) == 10_000 * 2 // 3
    assert not backend.client.exists(k.claim_grant)
    assert zscore(backend, k.lane(LANE).active, eid) == int(expires)
    a = attempt(backend, eid, 0)
    assert a["attempt_type"] == "initial" and a["attempt_state"] == "started" and a["lease_epoch"] == "1"
    assert backend.client.zrange(k.attempts, 0, -1) == [b"0"]
    assert [e["event"] for e in history_events(backend, eid)] == ["acquired"]


def test_a_claim_without_a_grant_is_refused(backend):
    eid = create(backend)
    raises("invalid_claim_grant", lambda: backend.call(claim_call(eid)))
    check(backend, eid)


def test_a_claim_by_another_worker_than_the_grantee_is_refused(backend):
    eid = create(backend)
    grant(backend, eid)
    raises("invalid_claim_grant", lambda: backend.call(claim_call(eid, worker_id=OTHER_WORKER)))
    assert backend.client.exists(ExecKeys(eid).claim_grant)
    check(backend, eid)


def test_a_lapsed_grant_key_is_gone_so_the_claim_is_an_invalid_grant(backend):
    eid = create(backend)
    grant(backend, eid, grant_ttl_ms=100)
    time.sleep(0.15)
    raises("invalid_claim_grant", lambda: backend.call(claim_call(eid)))
    check(backend, eid)


def test_a_grant_past_its_expiry_time_is_refused_and_kept(backend):
    eid = create(backend)
    grant(backend, eid)
    k = ExecKeys(eid)
    backend.client.hset(k.claim_grant, "grant_expires_at", backend.now_ms() - 1)
    raises("claim_grant_expired", lambda: backend.call(claim_call(eid)))
    assert backend.client.exists(k.claim_grant)
    check(backend, eid)


def test_a_claim_of_a_missing_execution_is_refused(backend):
    raises("execution_not_found", lambda: backend.call(claim_call(ExecutionId.mint(2))))


def test_a_claim_of_a_terminal_execution_is_not_leaseable(backend):
    eid = create(backend)
    f = claim(backend, eid)
    complete(backend, eid, f)
    raises("execution_not_leaseable", lambda: backend.call(claim_call(eid)))
    check(backend, eid)


def test_a_claim_of_a_delayed_execution_is_not_leaseable(backend):
    eid = create(backend, delay_until=backend.now_ms() + 60_000)
    backend.client.hset(ExecKeys(eid).claim_grant, mapping={"worker_id": WORKER})
    raises("execution_not_leaseable", lambda: backend.call(claim_call(eid)))
    check(backend, eid)


def test_a_claim_with_a_non_numeric_ttl_is_refused(backend):
    eid = create(backend)
    grant(backend, eid)
    call = claim_call(eid)
    call.args[6] = "long"
    raises("invalid_input", lambda: backend.call(call))
    check(backend, eid)


def test_a_malformed_attempt_policy_raises_before_writing(backend):
    eid = create(backend)
    grant(backend, eid)
    before = core(backend, eid)
    with pytest.raises(redis.ResponseError):
        backend.call(claim_call(eid, attempt_policy_json="{oops"))
    assert core(backend, eid) == before
    assert backend.client.exists(ExecKeys(eid).claim_grant)
    assert not backend.client.exists(ExecKeys(eid).attempt(0))
    check(backend, eid)


def test_a_claim_arms_the_attempt_timeout_and_execution_deadline(backend):
    eid = create(backend)
    grant(backend, eid)
    at = backend.now_ms() + 90_000
    before = backend.now_ms()
    backend.call(claim_call(eid, attempt_timeout_ms=5000, execution_deadline_at=at))
    check(backend, eid)
    k = ExecKeys(eid)
    score = zscore(backend, k.idx.attempt_timeout, eid)
    assert score is not None and before + 5000 <= score <= backend.now_ms() + 5000
    assert zscore(backend, k.idx.execution_deadline, eid) == at


def test_corrupted_records_are_refused_with_lease_conflict_or_active_attempt_exists(backend):
    # Not reachable through the lifecycle functions: a runnable core that claims ownership / a running attempt.
    eid = create(backend)
    k = ExecKeys(eid)
    grant(backend, eid)
    backend.client.hset(k.core, "ownership_state", "leased")
    raises("lease_conflict", lambda: backend.call(claim_call(eid)))
    backend.client.hset(k.core, mapping={"ownership_state": "unowned", "attempt_state": "running_attempt"})
    raises("active_attempt_exists", lambda: backend.call(claim_call(eid)))


def test_higher_priority_executions_are_claimed_first(backend):
    client = Client(backend)
    low = client.create(kind="job", priority=1).execution_id
    high = client.create(kind="job", priority=50).execution_id
    mid = client.create(kind="job", priority=10).execution_id
    worker = Worker(backend, WorkerConfig(worker_instance_id="w-prio"), Registry())
    order = [worker.claim_next(1)[0].execution_id for _ in range(3)]
    assert order == [high, mid, low]
    for eid in order:
        check(backend, eid)


def test_equal_priorities_are_claimed_in_creation_order(backend):
    client = Client(backend)
    eids = []
    for _ in range(3):
        eids.append(client.create(kind="job").execution_id)
        time.sleep(0.003)  # distinct created_at milliseconds
    worker = Worker(backend, WorkerConfig(worker_instance_id="w-fifo"), Registry())
    tasks = worker.claim_next(3)
    assert [t.execution_id for t in tasks] == eids
    for t in tasks:
        assert t.attempt_type == "initial" and t.lease_epoch == 1
        check(backend, t.execution_id)
