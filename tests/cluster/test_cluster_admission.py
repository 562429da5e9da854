"""Budgets and quotas gating claims on the local 3-primary cluster: the gate reads the server clock and the
budget facts (no TIME in a cluster pipeline), blocks, releases admissions (a transaction on the quota's
slot, the execution read beside it), and the scanners bring blocked work back."""

from __future__ import annotations

from typing import Any

from ffcore.backend import Backend
from ffcore.budgets import admission
from ffcore.budgets.budgets import create_budget, get_budget, report_usage, reset_budget
from ffcore.budgets.quotas import create_quota_policy, get_quota, quota_keys
from ffcore.engine.budget_scanners import AdmissionUnblockScanner, BudgetResetScanner, BudgetSampler, QuotaReconciler
from tests.ffcore.budgetkit import admitted, attached, blocking, in_flight, public_state, usage, worker

LANES = tuple(f"adm-{i}" for i in range(6))  # several lanes: several partitions, so several primaries


def _spread(backend: Backend, n: int, **kw: Any) -> list[str]:
    return [e for i in range(n) for e in attached(backend, lane=LANES[i % len(LANES)], **kw)]


def test_an_exhausted_budget_blocks_and_a_reset_brings_the_work_back(cbackend: Backend):
    bid, _ = create_budget(cbackend, hard={"tokens": 100})
    report_usage(cbackend, bid, {"tokens": 100})
    eids = _spread(cbackend, 4, budgets=(bid,))
    w = worker(cbackend, lanes=LANES, concurrency=8)
    assert w.claim_next(8) == []
    assert {public_state(cbackend, e) for e in eids} == {"rate_limited"}
    reason, detail = blocking(cbackend, eids[0])
    assert reason == "waiting_for_budget" and detail.startswith(f"budget {bid}: tokens at its hard limit")
    st = get_budget(cbackend, bid)
    assert st is not None and st.blocked_count == 4
    scanner = AdmissionUnblockScanner(cbackend)
    assert scanner.tick() == 0
    reset_budget(cbackend, bid)
    assert scanner.tick() == 4
    tasks = w.claim_next(8)
    assert sorted(t.execution_id for t in tasks) == sorted(eids)
    for t in tasks:
        t.report_usage(bid, {"tokens": 10})
        t.complete(b"ok")
    assert usage(cbackend, bid) == {"tokens": 40}
    assert BudgetSampler(cbackend).tick() == 1


def test_a_budget_resets_on_its_interval(cbackend: Backend):
    bid, _ = create_budget(cbackend, hard={"tokens": 10}, reset_interval_ms=1, now_ms=1)
    report_usage(cbackend, bid, {"tokens": 10})
    assert BudgetResetScanner(cbackend).tick() == 1
    assert usage(cbackend, bid) == {"tokens": 0}


def test_the_quota_cap_holds_across_primaries_and_slots_come_back(cbackend: Backend):
    qid, _ = create_quota_policy(cbackend, window_seconds=0, max_concurrent=2)
    eids = _spread(cbackend, 6, quota=qid)
    w = worker(cbackend, lanes=LANES, concurrency=8)
    tasks = w.claim_next(8) + w.claim_next(8)
    assert len(tasks) == 2 and in_flight(cbackend, qid) == 2
    assert admitted(cbackend, qid) == {t.execution_id for t in tasks}
    waiting = [e for e in eids if public_state(cbackend, e) == "rate_limited"]
    assert len(waiting) == 4 and blocking(cbackend, waiting[0])[1] == f"quota {qid}: concurrency cap of 2 reached"
    scanner = AdmissionUnblockScanner(cbackend)
    assert scanner.tick() == 0  # no room: nothing wakes
    tasks[0].complete(b"ok")  # gives its slot back
    assert in_flight(cbackend, qid) == 1
    assert scanner.tick() == 1  # one slot: one comes back
    (nxt,) = w.claim_next(8)
    assert nxt.execution_id in waiting and in_flight(cbackend, qid) == 2
    st = get_quota(cbackend, qid)
    assert st is not None and st.waiting_count == 3


def test_an_admission_is_released_only_when_its_execution_is_idle(cbackend: Backend):
    qid, _ = create_quota_policy(cbackend, window_seconds=0, max_concurrent=5)
    (eid,) = attached(cbackend, quota=qid, lane=LANES[0])
    (task,) = worker(cbackend, lanes=LANES).claim_next(1)
    # Running: the guard (read beside the quota's transaction) keeps the admission.
    assert not admission.release(cbackend, qid, eid, only_if=admission.idle)
    assert admitted(cbackend, qid) == {eid}
    task.cancel("done with it")  # its own release
    assert admitted(cbackend, qid) == set() and in_flight(cbackend, qid) == 0
    # A drifted counter is trimmed back to the admitted set by the reconciler.
    cbackend.client.incrby(quota_keys(cbackend, qid).concurrency, 3)
    assert in_flight(cbackend, qid) == 3
    QuotaReconciler(cbackend).tick()
    assert in_flight(cbackend, qid) == 0

