"""Reclaim grants (upstream v0.13): issue_reclaim_grant to a named worker, claim_from_reclaim_grant, and the
NotReclaimable / ReclaimCapExceeded / GrantNotFound outcomes."""

from __future__ import annotations

from ffcore.execution.client import Client
from ffcore.ids import ExecutionId
from ffcore.keys import ExecKeys
from ffcore.policy import Policy
from ffcore.worker.grant_claim import Claimed, claim_from_reclaim_grant
from ffcore.worker.grants import (
    GrantNotFound,
    NotReclaimable,
    ReclaimCapExceeded,
    ReclaimGranted,
    issue_reclaim_grant,
)
from ffcore.worker.worker import Registry, Worker, WorkerConfig


def _worker(backend, wiid: str, worker_id: str = "w-reclaim") -> Worker:
    return Worker(backend, WorkerConfig(worker_id=worker_id, worker_instance_id=wiid), Registry())


def _revoked(backend, **policy) -> str:
    c = Client(backend)
    eid = c.create(kind="job", policy=Policy(**policy) if policy else None).execution_id
    (task,) = _worker(backend, "wi-first").claim_next(1)
    assert task.execution_id == eid
    c.revoke_lease(eid)
    return eid


def test_a_revoked_execution_is_granted_to_the_named_worker_and_reclaimed_with_a_new_attempt(backend):
    eid = _revoked(backend)
    out = issue_reclaim_grant(backend, eid, worker_id="w-reclaim", worker_instance_id="wi-second")
    assert isinstance(out, ReclaimGranted) and out.grant.execution_id == eid and out.grant.expires_at_ms > 0
    assert out.grant.as_json()["partition_key"].startswith("{fp:")
    w = _worker(backend, "wi-second")
    res = claim_from_reclaim_grant(w, out.grant)
    assert isinstance(res, Claimed) and res.task.attempt_index == 1 and res.task.attempt_type == "reclaim"
    assert Client(backend).get_state(eid) == "active" and eid in w.in_flight
    assert isinstance(claim_from_reclaim_grant(w, out.grant), NotReclaimable)  # now leased again


def test_a_running_execution_is_not_reclaimable_and_gets_no_grant(backend):
    c = Client(backend)
    eid = c.create(kind="job").execution_id
    _worker(backend, "wi-run").claim_next(1)
    out = issue_reclaim_grant(backend, eid, worker_id="w-reclaim", worker_instance_id="wi-x")
    assert isinstance(out, NotReclaimable) and "execution_not_reclaimable" in out.detail
    assert not backend.client.exists(ExecKeys(ExecutionId(eid)).claim_grant)


def test_a_grant_issued_to_another_worker_is_not_found_by_this_one(backend):
    eid = _revoked(backend)
    out = issue_reclaim_grant(backend, eid, worker_id="someone-else", worker_instance_id="wi-else")
    assert isinstance(out, ReclaimGranted)
    assert isinstance(claim_from_reclaim_grant(_worker(backend, "wi-mine"), out.grant), GrantNotFound)


def test_an_execution_at_its_reclaim_cap_is_refused_a_grant_and_failed_by_the_claim(backend):
    eid = _revoked(backend, max_reclaim_count=1)
    first = issue_reclaim_grant(backend, eid, worker_id="w-reclaim", worker_instance_id="wi-2")
    assert isinstance(first, ReclaimGranted)
    assert isinstance(claim_from_reclaim_grant(_worker(backend, "wi-2"), first.grant), Claimed)
    Client(backend).revoke_lease(eid)
    refused = issue_reclaim_grant(backend, eid, worker_id="w-reclaim", worker_instance_id="wi-3")
    assert refused == ReclaimCapExceeded(eid, 1)
    # A grant issued before the cap was reached: the claim checks the cap first and fails the execution.
    out = claim_from_reclaim_grant(_worker(backend, "wi-3"), first.grant)
    assert out == ReclaimCapExceeded(eid, 1)
    assert Client(backend).get_state(eid) == "failed"
