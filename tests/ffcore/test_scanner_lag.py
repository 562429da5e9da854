"""Scanner lag counts only items that are really due: a revoked lease or a quota-held execution waits rightly
and is no lag, however old its index entry; an expired lease the scanner has to act on is."""

from __future__ import annotations

import time

from ffcore.budgets.quotas import create_quota_policy
from ffcore.engine.budget_scanners import AdmissionUnblockScanner
from ffcore.engine.lease_expiry import LeaseExpiryScanner
from ffcore.execution.client import Client
from ffcore.keys import ExecKeys

from .budgetkit import attached, worker

TEN_MIN_MS = 600_000


def _claimed(backend, lane="lag", ttl_ms=1_000):
    Client(backend).create(kind="job", lane=lane)
    w = worker(backend, lanes=(lane,), lease_ttl_ms=ttl_ms)
    (task,) = w.claim_next(1)
    return task


def _backdate(backend, zset, member, ms_ago):
    backend.client.zadd(zset, {member: backend.now_ms() - ms_ago})


def test_a_revoked_lease_ten_minutes_past_its_expiry_is_no_lag(backend):
    task = _claimed(backend)
    Client(backend).revoke_lease(task.execution_id)
    _backdate(backend, ExecKeys(task.execution_id).idx.lease_expiry, task.execution_id, TEN_MIN_MS)
    s = LeaseExpiryScanner(backend)
    assert s.tick() == 0
    assert s.stats.last_lag_ms == 0


def test_an_expired_lease_counts_as_lag_from_its_expiry(backend):
    task = _claimed(backend, ttl_ms=1_000)
    deadline = time.monotonic() + 5
    while backend.now_ms() <= task.lease_expires_at + 300:  # let it run over by ≥ 300 ms
        assert time.monotonic() < deadline
        time.sleep(0.05)
    s = LeaseExpiryScanner(backend)
    assert s.tick() == 1
    assert 300 <= s.stats.last_lag_ms < 5_000


def test_a_quota_held_execution_is_no_lag_until_its_quota_frees_a_slot(backend):
    qid, _ = create_quota_policy(backend, window_seconds=0, max_concurrent=1)
    both = {str(e) for e in attached(backend, 2, quota=qid)}
    w = worker(backend)
    (running,) = w.claim_next(2)  # the other one is blocked by the concurrency cap
    (held,) = both - {running.execution_id}
    blocked_index = ExecKeys(held).lane("default").index("blocked:quota")
    assert backend.client.zscore(blocked_index, held) is not None
    _backdate(backend, blocked_index, held, TEN_MIN_MS)
    s = AdmissionUnblockScanner(backend, interval_ms=2_000)
    assert s.tick() == 0
    assert s.stats.last_lag_ms == 0
    running.complete(b"done")  # the slot frees: the held execution is due now, and released on the next pass
    assert s.tick() == 1
    assert 0 <= s.stats.last_lag_ms < 5_000  # since the previous pass, not the ten minutes it waited
