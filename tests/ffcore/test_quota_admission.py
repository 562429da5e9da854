"""Quotas and the scheduler: the concurrency cap is never exceeded and is given back on complete, fail
and cancel; the rate window slides over real time; waiting executions come back only as room frees."""

from __future__ import annotations

import time

import pytest

from ffcore import events, keys
from ffcore.budgets import admission
from ffcore.budgets.quotas import create_quota_policy, get_quota, quota_keys
from ffcore.engine.budget_scanners import AdmissionUnblockScanner, QuotaReconciler
from ffcore.errors import InvalidInput, ScriptError
from ffcore.execution.client import Client
from ffcore.policy import Policy, RetryPolicy
from tests.bounded import join
from tests.pubsub_support import confirmed_pubsub

from .budgetkit import admitted, attached, blocking, in_flight, public_state, worker
from .invariants import check


def test_creating_a_quota_policy_stores_it_once(backend):
    qid, created = create_quota_policy(backend, window_seconds=60, max_requests_per_window=10, max_concurrent=2)
    assert created
    assert create_quota_policy(backend, quota_id=qid, window_seconds=1, max_concurrent=9) == (qid, False)
    st = get_quota(backend, qid)
    assert st is not None and (st.definition.window_seconds, st.definition.max_requests, st.definition.cap) == \
        (60, 10, 2)
    with pytest.raises(InvalidInput, match="window"):
        create_quota_policy(backend, window_seconds=0, max_requests_per_window=5)


def test_the_scheduler_never_grants_past_the_concurrency_cap(backend):
    qid, _ = create_quota_policy(backend, window_seconds=0, max_concurrent=2)
    eids = attached(backend, 5, quota=qid)
    w = worker(backend, concurrency=8)
    tasks = w.claim_next(5) + w.claim_next(5)
    assert len(tasks) == 2
    assert in_flight(backend, qid) == 2 and admitted(backend, qid) == {t.execution_id for t in tasks}
    waiting = [e for e in eids if public_state(backend, e) == "rate_limited"]
    assert len(waiting) == 3
    reason, detail = blocking(backend, waiting[0])
    assert reason == "waiting_for_quota" and detail == f"quota {qid}: concurrency cap of 2 reached"
    # The unblock reconciler sees no room: nothing wakes, so nothing spins.
    assert AdmissionUnblockScanner(backend).tick() == 0
    assert w.claim_next(5) == []
    st = get_quota(backend, qid)
    assert st is not None and st.waiting_count == 3 and st.cap_state == "hard"


def _finish(task, how: str) -> None:
    if how == "complete":
        task.complete(b"ok")
    elif how == "fail":
        task.fail("boom")
    elif how == "fail_with_retry":
        assert task.fail("boom").retry_scheduled
    else:
        task.cancel("done with it")


@pytest.mark.parametrize("how", ["complete", "fail", "fail_with_retry", "cancel"])
def test_the_concurrency_cap_is_released_when_the_attempt_ends(backend, how):
    qid, _ = create_quota_policy(backend, window_seconds=0, max_concurrent=1)
    retry = Policy(retry=RetryPolicy(max_retries=1)) if how == "fail_with_retry" else None
    eids = attached(backend, 2, quota=qid, **({"retry": retry.retry} if retry else {}))
    w = worker(backend)
    (task,) = w.claim_next(2)
    first, second = task.execution_id, next(e for e in eids if e != task.execution_id)
    assert public_state(backend, second) == "rate_limited"
    _finish(task, how)
    check(backend, first)
    assert in_flight(backend, qid) == 0 and admitted(backend, qid) == set()
    assert AdmissionUnblockScanner(backend).tick() == 1
    (nxt,) = w.claim_next(1)
    assert nxt.execution_id == second and in_flight(backend, qid) == 1


def test_an_operator_cancel_is_released_by_the_quota_reconciler(backend):
    qid, _ = create_quota_policy(backend, window_seconds=0, max_concurrent=1)
    (eid,) = attached(backend, quota=qid)
    (task,) = worker(backend).claim_next(1)
    Client(backend).cancel(eid, reason="operator stop")
    assert in_flight(backend, qid) == 1  # the worker never saw a terminal op
    assert QuotaReconciler(backend).tick() == 1
    assert in_flight(backend, qid) == 0 and admitted(backend, qid) == set()
    assert task.lease_lost.is_set() is False  # (the worker finds out on its next call)


def test_a_running_execution_keeps_its_slot_through_the_reconciler(backend):
    qid, _ = create_quota_policy(backend, window_seconds=0, max_concurrent=3)
    attached(backend, 2, quota=qid)
    tasks = worker(backend).claim_next(2)
    assert QuotaReconciler(backend).tick() == 0
    assert in_flight(backend, qid) == 2
    for t in tasks:
        t.complete()


def test_release_is_idempotent(backend):
    qid, _ = create_quota_policy(backend, window_seconds=0, max_concurrent=5)
    attached(backend, 2, quota=qid)
    a, b = worker(backend).claim_next(2)
    assert admission.release(backend, qid, a.execution_id) is True
    assert admission.release(backend, qid, a.execution_id) is False
    assert in_flight(backend, qid) == 1  # b still counted
    a.complete()  # the task's own release finds nothing left to give back
    assert in_flight(backend, qid) == 1
    b.complete()
    assert in_flight(backend, qid) == 0


def test_the_reconciler_trims_an_over_counted_counter_to_the_admitted_set(backend):
    qid, _ = create_quota_policy(backend, window_seconds=0, max_concurrent=5)
    attached(backend, 1, quota=qid)
    (t,) = worker(backend).claim_next(1)
    backend.client.incrby(quota_keys(backend, qid).concurrency, 2)  # e.g. two racing claimers' admissions
    assert QuotaReconciler(backend).tick() == 2
    assert in_flight(backend, qid) == 1
    t.complete()


def test_a_quota_window_slides_over_real_time(backend):
    qid, _ = create_quota_policy(backend, window_seconds=1, max_requests_per_window=2)
    eids = attached(backend, 3, quota=qid)
    w = worker(backend, concurrency=8)
    tasks = w.claim_next(3)
    assert len(tasks) == 2
    for t in tasks:
        t.complete()  # finishing does not make room: the window counts admissions, not running work
    (late,) = [e for e in eids if e not in {t.execution_id for t in tasks}]
    reason, detail = blocking(backend, late)
    assert reason == "waiting_for_quota" and f"quota {qid}: rate limit of 2 per 1s reached; retry in" in detail
    scanner = AdmissionUnblockScanner(backend)
    assert scanner.tick() == 0
    time.sleep(1.05)
    assert scanner.tick() == 1
    (t,) = w.claim_next(3)
    assert t.execution_id == late
    t.complete()
    st = get_quota(backend, qid)
    assert st is not None and st.in_window == 1 and st.oldest_expires_at > 0


def test_unblocking_wakes_only_as_many_as_there_is_room(backend):
    qid, _ = create_quota_policy(backend, window_seconds=0, max_concurrent=2)
    attached(backend, 6, quota=qid)
    w = worker(backend, concurrency=8)
    running = w.claim_next(6)
    assert len(running) == 2
    running[0].complete()
    assert AdmissionUnblockScanner(backend).tick() == 1  # one slot free: one of four wakes
    assert len(w.claim_next(6)) == 1
    assert in_flight(backend, qid) == 2


def test_a_refused_claim_gives_the_admission_back_unless_someone_else_holds_the_execution(backend):
    from .invariants import grant

    qid, _ = create_quota_policy(backend, window_seconds=0, max_concurrent=1)
    (eid,) = attached(backend, quota=qid)

    def admit() -> None:
        backend.client.sadd(quota_keys(backend, qid).admitted_set, eid)
        backend.client.incr(quota_keys(backend, qid).concurrency)

    admit()
    admission.release_unclaimed(backend, {eid: qid}, [(eid, ScriptError("capability_mismatch"),
                                                       ScriptError("invalid_claim_grant"))])
    assert in_flight(backend, qid) == 0
    admit()
    grant(backend, eid, worker_id="other")  # another claimer is about to claim it on this admission
    admission.release_unclaimed(backend, {eid: qid}, [(eid, ScriptError("grant_already_exists"),
                                                       ScriptError("invalid_claim_grant"))])
    assert in_flight(backend, qid) == 1


def test_executions_waiting_for_admission_are_listed_on_the_policy(backend):
    qid, _ = create_quota_policy(backend, window_seconds=0, max_concurrent=1)
    eids = attached(backend, 3, quota=qid)
    worker(backend).claim_next(3)
    st = get_quota(backend, qid)
    assert st is not None and st.in_flight == 1 and st.admitted == 1
    assert {e for e, _ in st.waiting} == set(eids) - admitted(backend, qid)
    assert backend.client.zcard(keys.quota_blocked(quota_keys(backend, qid))) == 2


def test_racing_workers_never_run_more_than_the_cap_and_all_work_finishes(backend):
    import threading

    qid, _ = create_quota_policy(backend, window_seconds=0, max_concurrent=3)
    eids = attached(backend, 15, quota=qid)
    lock, running, peak, done = threading.Lock(), [0], [0], set()
    stop = threading.Event()

    def work(i: int) -> None:
        w = worker(backend, worker_id=f"w{i}", concurrency=2)
        while not stop.is_set() and len(done) < len(eids):
            for t in w.claim_next(2):
                with lock:
                    running[0] += 1
                    peak[0] = max(peak[0], running[0])
                time.sleep(0.01)
                with lock:
                    running[0] -= 1
                    done.add(t.execution_id)
                t.complete()
            time.sleep(0.002)

    def reconcile() -> None:
        scanners = [AdmissionUnblockScanner(backend), QuotaReconciler(backend)]
        while not stop.is_set():
            for s in scanners:
                s.tick()
            time.sleep(0.02)

    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(4)] + [
        threading.Thread(target=reconcile, daemon=True)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 20
    while len(done) < len(eids) and time.monotonic() < deadline:
        time.sleep(0.05)
    stop.set()
    join(threads)
    assert done == set(eids)
    assert 1 <= peak[0] <= 3
    QuotaReconciler(backend).tick()
    assert in_flight(backend, qid) == 0 and admitted(backend, qid) == set()


def test_admissions_and_releases_announce_the_quota_to_live_pages(backend):
    qid, _ = create_quota_policy(backend, window_seconds=0, max_concurrent=1)
    attached(backend, 2, quota=qid)
    ps = confirmed_pubsub(backend.client, keys.EVENTS_CHANNEL)

    def topics_within(seconds: float) -> set[str]:
        seen: set[str] = set()
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and qid not in seen:
            m = ps.get_message(timeout=0.1)
            if m is not None:
                ch = events.parse(keys.EVENTS_CHANNEL, m["data"])
                seen |= ch.topics if ch else set()
        return seen

    try:
        w = worker(backend, concurrency=4)
        (task,) = w.claim_next(2)
        assert {"quotas", qid} <= topics_within(2.0)  # admitted one, blocked the other
        task.complete(b"ok")
        assert {"quotas", qid} <= topics_within(2.0)  # the release
    finally:
        ps.close()
