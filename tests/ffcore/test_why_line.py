"""Why-4 item 3: the "why isn't this running" line checks the worker registry (a lane nobody serves says so)
and says what really happens next to an expired or revoked lease."""

from __future__ import annotations

from ffcore.execution.client import Client
from ffcore.execution.explain import why
from ffcore.worker.heartbeat import Heartbeat
from ffcore.workers import list_workers

WAITING = {"lifecycle_phase": "runnable", "eligibility_state": "eligible_now", "lane_id": "manual"}
REVOKED = {"lifecycle_phase": "active", "ownership_state": "lease_revoked", "lane_id": "manual",
           "lease_revoke_reason": "stuck", "current_worker_instance_id": "wi-9"}


def serving(backend) -> frozenset[str]:
    return frozenset(lane for w in list_workers(backend) for lane in w.lanes)


def test_a_waiting_execution_on_a_lane_no_live_worker_serves_says_so(backend):
    Client(backend).create(kind="job", lane="manual")
    assert serving(backend) == frozenset()
    assert why(WAITING, serving(backend)).text == "No live worker serves lane manual: it runs once a worker for " \
                                                  "that lane starts"


def test_a_waiting_execution_on_a_served_lane_waits_for_a_worker(backend):
    hb = Heartbeat(backend, worker_id="w", wiid="wi-why", lanes=("manual",), capabilities_csv="", concurrency=1,
                   interval_ms=2000, lease_ttl_ms=30_000)
    hb.register()
    try:
        assert why(WAITING, serving(backend)).text == "Waiting for a worker on lane manual"
    finally:
        hb.unregister()


def test_a_revoked_lease_says_who_reclaims_it_or_that_nobody_will():
    served = why(REVOKED, frozenset({"manual"})).text
    assert "reclaims it on its next claim pass and starts a new attempt" in served
    assert "result is refused" in served and "waiting for a worker" not in served
    assert "no live worker serves lane manual, so nothing reclaims it" in why(REVOKED, frozenset()).text


def test_an_expired_lease_without_a_serving_worker_is_not_said_to_be_reclaimed():
    core = {**REVOKED, "ownership_state": "lease_expired_reclaimable"}
    assert "nothing reclaims it until one starts" in why(core, frozenset({"other"})).text


def test_a_success_after_a_failed_attempt_does_not_quote_the_old_failure():
    core = {"lifecycle_phase": "terminal", "terminal_outcome": "success", "completed_at": "1700000000000",
            "failure_reason": "ConnectionError: upstream API timed out"}
    assert why(core, frozenset()).text == "Finished successfully at 2023-11-14 22:13:20 UTC"
    failed = why({**core, "terminal_outcome": "failed"}, frozenset()).text
    assert failed == "Failed at 2023-11-14 22:13:20 UTC: ConnectionError: upstream API timed out"
