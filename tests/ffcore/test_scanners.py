"""The lifecycle scanners (one tick each): lease expiry, delayed promotion, attempt timeout, deadline.

ff_expire_execution is covered here for its active and runnable paths and its no-op replies.
"""

import time

from ffcore import functions as F
from ffcore.engine.delayed import DelayedPromoter
from ffcore.engine.lease_expiry import LeaseExpiryScanner
from ffcore.engine.timeouts import AttemptTimeoutScanner, ExecutionDeadlineScanner
from ffcore.execution.client import Client
from ffcore.ids import ExecutionId
from ffcore.keys import ExecKeys
from ffcore.policy import Policy
from ffcore.worker.worker import Registry, Worker, WorkerConfig

from .invariants import LANE, WIID, attempt, check, claim, complete, create, expire, history_events, raises, zscore


def test_the_lease_expiry_scanner_marks_only_due_leases(backend):
    due = create(backend)
    claim(backend, due, ttl_ms=200)
    fresh = create(backend, lane="other")
    claim(backend, fresh, lane="other")
    time.sleep(0.25)
    scanner = LeaseExpiryScanner(backend)
    assert scanner.tick() == 1
    assert check(backend, due)["ownership_state"] == "lease_expired_reclaimable"
    assert check(backend, fresh)["ownership_state"] == "leased"
    assert scanner.stats.last_lag_ms >= 0 and scanner.tick() == 0  # already expired: not acted on again


def test_the_delayed_promoter_promotes_due_executions_of_registered_lanes(backend):
    client = Client(backend)
    soon = client.create(kind="job", delay_until=backend.now_ms() + 150).execution_id
    later = client.create(kind="job", delay_until=backend.now_ms() + 60_000).execution_id
    promoter = DelayedPromoter(backend)
    assert promoter.tick() == 0
    time.sleep(0.2)
    assert promoter.tick() == 1
    assert check(backend, soon)["public_state"] == "waiting"
    assert check(backend, later)["public_state"] == "delayed"
    (task,) = Worker(backend, WorkerConfig(worker_instance_id="w-dp"), Registry()).claim_next(2)
    assert task.execution_id == soon


def test_the_delayed_promoter_brings_a_retry_back(backend):
    eid = create(backend, policy=Policy())
    f = claim(backend, eid)
    backend.call(F.fail_execution(ExecKeys(eid), f, reason="x",
                                  retry_policy_json='{"max_retries":1,"backoff":{"type":"fixed","delay_ms":100}}'))
    check(backend, eid)
    time.sleep(0.15)
    assert DelayedPromoter(backend).tick() == 1
    c = check(backend, eid)
    assert c["public_state"] == "waiting" and c["attempt_state"] == "pending_retry_attempt"


def test_the_attempt_timeout_scanner_expires_an_overrunning_attempt(backend):
    Client(backend).create(kind="job", policy=Policy(attempt_timeout_ms=150))
    worker = Worker(backend, WorkerConfig(worker_instance_id=WIID), Registry())
    (task,) = worker.claim_next(1)
    eid = task.execution_id
    k = ExecKeys(eid)
    assert zscore(backend, k.idx.attempt_timeout, eid) is not None
    scanner = AttemptTimeoutScanner(backend)
    assert scanner.tick() == 0
    check(backend, eid)
    time.sleep(0.2)
    assert scanner.tick() == 1
    c = check(backend, eid)
    assert c["terminal_outcome"] == "expired" and c["public_state"] == "expired"
    assert c["failure_reason"] == "attempt_timeout" and c["attempt_state"] == "attempt_terminal"
    assert attempt(backend, eid, 0)["attempt_state"] == "ended_failure"
    assert not backend.client.sismember(k.idx.worker_leases(WIID), eid)
    assert history_events(backend, eid)[-1]["reason"] == "expired:attempt_timeout"
    err = raises("execution_not_active", lambda: task.complete("too late"))
    assert err.details == ["expired", "1"]
    assert task.lease_lost.is_set()


def test_the_deadline_scanner_expires_a_waiting_execution(backend):
    eid = create(backend, deadline_at=backend.now_ms() + 150)
    scanner = ExecutionDeadlineScanner(backend)
    assert scanner.tick() == 0
    time.sleep(0.2)
    assert scanner.tick() == 1
    c = check(backend, eid)
    assert c["public_state"] == "expired" and c["failure_reason"] == "execution_deadline"
    assert c["attempt_state"] == "pending_first_attempt"


def test_the_deadline_scanner_expires_a_delayed_execution(backend):
    eid = create(backend, deadline_at=backend.now_ms() + 100, delay_until=backend.now_ms() + 60_000)
    time.sleep(0.15)
    assert ExecutionDeadlineScanner(backend).tick() == 1
    assert check(backend, eid)["public_state"] == "expired"


def test_the_deadline_scanner_expires_an_active_execution(backend):
    eid = create(backend)
    claim(backend, eid, execution_deadline_at=backend.now_ms() + 150)
    time.sleep(0.2)
    assert ExecutionDeadlineScanner(backend).tick() == 1
    c = check(backend, eid)
    assert c["public_state"] == "expired" and c["failure_reason"] == "execution_deadline"
    assert zscore(backend, ExecKeys(eid).lane(LANE).active, eid) is None


def test_expiring_a_finished_or_missing_execution_only_cleans_the_indexes(backend):
    eid = create(backend)
    complete(backend, eid, claim(backend, eid))
    k = ExecKeys(eid)
    backend.client.zadd(k.idx.attempt_timeout, {eid: 1})
    backend.client.zadd(k.idx.execution_deadline, {eid: 1})
    assert expire(backend, eid).fields == ["already_terminal"]
    assert check(backend, eid)["public_state"] == "completed"

    missing = ExecutionId.mint(2)
    mk = ExecKeys(missing)
    backend.client.zadd(mk.idx.attempt_timeout, {missing: 1})
    call = F.expire_execution(mk, F.CoreRefs(LANE, 0, "", ""), reason="attempt_timeout")
    assert backend.call(call).fields == ["not_found_cleaned"]
    assert zscore(backend, mk.idx.attempt_timeout, missing) is None


def test_expire_reports_the_previous_phase(backend):
    eid = create(backend)
    claim(backend, eid)
    assert expire(backend, eid, "execution_deadline").fields == ["expired", "active"]
    check(backend, eid)
