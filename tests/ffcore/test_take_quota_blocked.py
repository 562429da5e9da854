"""Why-4 item 4: an operator's "take now" on a quota-blocked execution releases the block and leases it to
`operator` without taking a quota slot; a refused take puts the block back unchanged."""

from __future__ import annotations

import pytest

from ffcore import keys
from ffcore.budgets.quotas import create_quota_policy, quota_keys
from ffcore.errors import ScriptError
from ffcore.keys import ExecKeys
from ffcore.reads import text
from ffcore.worker.grants import claim_for_worker, issue_grant_and_claim

from .budgetkit import attached, blocking, in_flight, public_state
from .invariants import check, core


def quota_blocked(backend):
    qid, _ = create_quota_policy(backend, window_seconds=0, max_concurrent=1)
    first, second = attached(backend, 2, quota=qid)
    for wiid in ("wi-1", "wi-2"):
        claim_for_worker(backend, lane="default", worker_id="w", worker_instance_id=wiid, capabilities_csv="",
                         grant_ttl_ms=5000)
    held = [e for e in (first, second) if public_state(backend, e) == "rate_limited"]
    assert len(held) == 1 and blocking(backend, held[0])[0] == "waiting_for_quota"
    return qid, held[0]


def blocked_members(backend, qid) -> set[str]:
    return {text(m) for m in backend.client.zrange(keys.quota_blocked(quota_keys(backend, qid)), 0, -1)}


def test_taking_a_quota_blocked_execution_leases_it_to_the_operator_without_a_quota_slot(backend):
    qid, eid = quota_blocked(backend)
    assert str(eid) in blocked_members(backend, qid)
    t = issue_grant_and_claim(backend, str(eid), lease_duration_ms=30_000)
    c = check(backend, eid)
    assert c["public_state"] == "active" and c["current_worker_id"] == "operator" and t.attempt_index == 0
    assert in_flight(backend, qid) == 1  # still only the worker's admission: the take bypasses the quota
    assert str(eid) not in blocked_members(backend, qid)


def test_a_refused_take_of_a_quota_blocked_execution_puts_the_block_back(backend):
    qid, eid = quota_blocked(backend)
    before = core(backend, eid)
    backend.client.hset(ExecKeys(eid).claim_grant, "worker_id", "someone")  # a grant outstanding: refused
    with pytest.raises(ScriptError) as e:
        issue_grant_and_claim(backend, str(eid), lease_duration_ms=30_000)
    assert e.value.code == "grant_already_exists"
    after = check(backend, eid)
    assert after["eligibility_state"] == "blocked_by_quota" and public_state(backend, eid) == "rate_limited"
    assert blocking(backend, eid) == (before["blocking_reason"], before["blocking_detail"])
