"""ff_complete_execution and ff_fail_execution: terminal success, terminal failure, retry with backoff."""

import json

import pytest

from ffcore.execution.client import Client
from ffcore.keys import ExecKeys
from ffcore.policy import Backoff, Policy, RetryPolicy
from ffcore.worker.worker import Registry, Worker, WorkerConfig

from .invariants import (
    LANE,
    WIID,
    attempt,
    check,
    claim,
    complete,
    create,
    fail,
    fixed_retry,
    history_events,
    promote,
    zscore,
)


def test_completing_stores_the_result_and_makes_it_terminal(backend):
    eid = create(backend)
    f = claim(backend, eid, attempt_timeout_ms=60_000, execution_deadline_at=backend.now_ms() + 60_000)
    assert complete(backend, eid, f, b'{"ok":true}').fields == ["completed"]
    c = check(backend, eid)
    k = ExecKeys(eid)
    assert c["lifecycle_phase"] == "terminal" and c["terminal_outcome"] == "success"
    assert c["public_state"] == "completed" and c["attempt_state"] == "attempt_terminal"
    for field in ("current_lease_id", "current_worker_id", "current_worker_instance_id", "lease_expires_at",
                  "lease_last_renewed_at", "lease_renewal_deadline"):
        assert c[field] == "", field
    assert c["current_attempt_id"] == f.attempt_id  # kept for the record
    assert Client(backend).get_result(eid) == b'{"ok":true}'
    a = attempt(backend, eid, 0)
    assert a["attempt_state"] == "ended_success" and a["ended_at"]
    assert not backend.client.sismember(k.idx.worker_leases(WIID), eid)
    assert zscore(backend, k.lane(LANE).terminal, eid) == int(c["completed_at"])
    released = history_events(backend, eid)[-1]
    assert released["event"] == "released" and released["reason"] == "completed"
    assert released["lease_id"] == f.lease_id and released["lease_epoch"] == "1"


def test_completing_without_a_result_stores_none(backend):
    eid = create(backend)
    complete(backend, eid, claim(backend, eid))
    check(backend, eid)
    assert Client(backend).get_result(eid) is None


def test_failing_without_a_retry_policy_is_terminal(backend):
    eid = create(backend)
    f = claim(backend, eid)
    assert fail(backend, eid, f, reason="disk full", category="io").fields == ["terminal_failed"]
    c = check(backend, eid)
    assert c["terminal_outcome"] == "failed" and c["public_state"] == "failed"
    assert c["failure_reason"] == "disk full" and c["retry_count"] == "0"
    a = attempt(backend, eid, 0)
    assert (a["attempt_state"], a["failure_reason"], a["failure_category"]) == ("ended_failure", "disk full", "io")
    assert history_events(backend, eid)[-1]["reason"] == "failed_terminal"


@pytest.mark.parametrize("policy", ["null", "{broken", '{"backoff":{"type":"fixed"}}', '{"max_retries":0}'])
def test_a_retry_policy_that_allows_no_retry_fails_terminally(backend, policy):
    eid = create(backend)
    assert fail(backend, eid, claim(backend, eid), retry_policy_json=policy).fields == ["terminal_failed"]
    check(backend, eid)


def test_failing_with_retries_left_schedules_a_retry_after_the_backoff(backend):
    eid = create(backend)
    f = claim(backend, eid)
    before = backend.now_ms()
    reply = fail(backend, eid, f, reason="flaky", retry_policy_json=fixed_retry(3, delay_ms=5000))
    after = backend.now_ms()
    assert reply[0] == "retry_scheduled"
    delay_until = int(reply[1])
    assert before + 5000 <= delay_until <= after + 5000
    c = check(backend, eid)
    assert c["lifecycle_phase"] == "runnable" and c["public_state"] == "delayed"
    assert c["eligibility_state"] == "not_eligible_until_time"
    assert c["blocking_reason"] == "waiting_for_retry_backoff"
    assert c["blocking_detail"] == f"retry backoff until {delay_until} (attempt 0 failed: flaky)"
    assert c["attempt_state"] == "pending_retry_attempt" and c["retry_count"] == "1"
    assert c["pending_retry_reason"] == "flaky" and c["pending_previous_attempt_index"] == "0"
    assert c["current_attempt_id"] == "" and c["delay_until"] == str(delay_until)
    assert zscore(backend, ExecKeys(eid).lane(LANE).delayed, eid) == delay_until
    assert attempt(backend, eid, 0)["attempt_state"] == "ended_failure"
    assert history_events(backend, eid)[-1]["reason"] == "failed_retry_scheduled"


def test_the_next_claim_after_a_retry_is_a_retry_attempt_with_lineage(backend):
    eid = create(backend)
    fail(backend, eid, claim(backend, eid), reason="flaky", retry_policy_json=fixed_retry(3, delay_ms=1))
    assert promote(backend, eid, now_ms=backend.now_ms() + 10).fields == ["promoted"]
    c = check(backend, eid)
    assert c["attempt_state"] == "pending_retry_attempt" and c["public_state"] == "waiting"
    f = claim(backend, eid)
    assert (f.attempt_index, f.lease_epoch) == (1, 2)
    a = attempt(backend, eid, 1)
    assert a["attempt_type"] == "retry"
    assert a["retry_reason"] == "flaky" and a["previous_attempt_index"] == "0"
    c = check(backend, eid)
    assert c["pending_retry_reason"] == "" and c["pending_previous_attempt_index"] == ""
    assert c["retry_count"] == "1"


def test_it_retries_until_the_retries_are_exhausted(backend):
    eid = create(backend, policy=Policy(retry=RetryPolicy(max_retries=2, backoff=Backoff(kind="fixed", delay_ms=1))))
    worker = Worker(backend, WorkerConfig(worker_instance_id="w-retry"), Registry())
    outcomes, types = [], []
    for _ in range(3):
        promote(backend, eid, now_ms=backend.now_ms() + 10)  # no-op on the first round
        check(backend, eid)
        (task,) = worker.claim_next(1)
        types.append(task.attempt_type)
        check(backend, eid)
        outcomes.append(task.fail("still broken", "transient").retry_scheduled)
        check(backend, eid)
    assert types == ["initial", "retry", "retry"]
    assert outcomes == [True, True, False]
    c = check(backend, eid)
    assert c["public_state"] == "failed" and c["retry_count"] == "2" and c["total_attempt_count"] == "3"
    assert [attempt(backend, eid, i)["attempt_state"] for i in range(3)] == ["ended_failure"] * 3
    assert worker.claim_next(1) == []


def test_exponential_backoff_grows_and_is_capped(backend):
    policy = json.dumps({"max_retries": 5, "backoff": {"type": "exponential", "initial_delay_ms": 100,
                                                       "multiplier": 3, "max_delay_ms": 250}})
    eid = create(backend)
    delays = []
    for _ in range(3):
        f = claim(backend, eid)
        before = backend.now_ms()
        delay_until = int(fail(backend, eid, f, retry_policy_json=policy)[1])
        after = backend.now_ms()
        check(backend, eid)
        delays.append((delay_until - after, delay_until - before))
        promote(backend, eid, now_ms=delay_until)
        check(backend, eid)
    for (lo, hi), expected in zip(delays, [100, 250, 250], strict=True):
        assert lo <= expected <= hi


def test_a_fractional_backoff_is_rounded_to_whole_milliseconds(backend):
    policy = json.dumps({"max_retries": 5, "backoff": {"type": "exponential", "initial_delay_ms": 5,
                                                       "multiplier": 1.5, "max_delay_ms": 1000}})
    eid = create(backend)
    fail(backend, eid, claim(backend, eid), retry_policy_json=policy)
    promote(backend, eid, now_ms=backend.now_ms() + 100)
    reply = fail(backend, eid, claim(backend, eid), retry_policy_json=policy)  # 5 * 1.5 = 7.5 ms
    c = check(backend, eid)
    assert reply[1].isdigit() and c["delay_until"] == reply[1]
    assert "." not in c["blocking_detail"]


def test_an_unknown_backoff_type_waits_one_second(backend):
    eid = create(backend)
    f = claim(backend, eid)
    before = backend.now_ms()
    delay_until = int(fail(backend, eid, f, retry_policy_json='{"max_retries":1,"backoff":{"type":"zigzag"}}')[1])
    assert before + 1000 <= delay_until <= backend.now_ms() + 1000
    check(backend, eid)


def test_the_task_fail_uses_the_stored_retry_policy(backend):
    Client(backend).create(kind="job", policy=Policy(retry=RetryPolicy(max_retries=1)))
    (task,) = Worker(backend, WorkerConfig(worker_instance_id="w-p"), Registry()).claim_next(1)
    out = task.fail("nope")
    assert out.retry_scheduled and out.delay_until is not None
    c = check(backend, task.execution_id)
    assert int(c["delay_until"]) == out.delay_until
