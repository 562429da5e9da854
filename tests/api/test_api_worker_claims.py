"""The worker claim routes (#24 items 1, 3, 8): POST /v1/workers/{id}/claim runs budget and quota admission
before it grants; a worker claims through it over real HTTP (ServerScheduler); POST
/v1/executions/{id}/grant-and-claim takes one execution now, audited with its reason."""

from __future__ import annotations

import pytest

from ffcore import audit
from ffcore.budgets.budgets import create_budget, report_usage
from ffcore.budgets.quotas import create_quota_policy
from ffcore.execution.client import Client
from ffcore.policy import Policy
from ffcore.worker.grant_claim import SchedulerError, ServerScheduler, claim_via_server
from ffcore.worker.worker import Registry, Worker, WorkerConfig
from tests.keyspace import MISSING_EID, changed, keyspace

from .conftest import API_TOKEN
from .helpers import post

BODY = {"lane_id": "default", "worker_instance_id": "wi-rest", "grant_ttl_ms": 5000}


def attached(backend, **kw) -> str:
    return Client(backend).create(kind="job", lane="default", policy=Policy(**kw)).execution_id


def state(backend, eid: str) -> str:
    return Client(backend).get_state(eid)


def test_a_rest_claiming_worker_is_refused_at_a_hard_budget_limit_and_granted_below(client, dashboard_backend):
    bid, _ = create_budget(dashboard_backend, hard={"tokens": 10})
    report_usage(dashboard_backend, bid, {"tokens": 9})
    below = attached(dashboard_backend, budget_ids=(bid,))
    r = post(client, "/v1/workers/w-rest/claim", BODY)
    assert r.status_code == 200 and r.json()["execution_id"] == below
    report_usage(dashboard_backend, bid, {"tokens": 1})
    held = attached(dashboard_backend, budget_ids=(bid,))
    assert post(client, "/v1/workers/w-rest/claim", {**BODY, "worker_instance_id": "wi-2"}).status_code == 204
    assert state(dashboard_backend, held) == "rate_limited"


def test_a_rest_claiming_worker_is_refused_at_a_quota_cap_and_granted_below(client, dashboard_backend):
    qid, _ = create_quota_policy(dashboard_backend, window_seconds=0, max_concurrent=1)
    first, second = (attached(dashboard_backend, quota_policy_id=qid) for _ in range(2))
    r = post(client, "/v1/workers/w-rest/claim", BODY)
    assert r.status_code == 200 and r.json()["execution_id"] in (first, second)
    assert post(client, "/v1/workers/w-rest/claim", {**BODY, "worker_instance_id": "wi-2"}).status_code == 204
    other = second if r.json()["execution_id"] == first else first
    assert state(dashboard_backend, other) == "rate_limited"


@pytest.mark.django_db(transaction=True)
def test_a_worker_claims_through_the_route_over_http(live_server, client, dashboard_backend):
    bid, _ = create_budget(dashboard_backend, hard={"tokens": 1})
    report_usage(dashboard_backend, bid, {"tokens": 1})
    refused = attached(dashboard_backend, budget_ids=(bid,))
    eid = Client(dashboard_backend).create(kind="job", lane="default", payload=b"7").execution_id
    w = Worker(dashboard_backend, WorkerConfig(worker_id="w-http", scheduler=live_server.url), Registry())
    task = claim_via_server(w, "default", source=ServerScheduler(live_server.url, API_TOKEN))
    assert task is not None and task.execution_id == eid and task.json() == 7
    task.complete(b"done")
    assert state(dashboard_backend, eid) == "completed"
    assert claim_via_server(w, "default", source=ServerScheduler(live_server.url, API_TOKEN)) is None
    assert state(dashboard_backend, refused) == "rate_limited"
    with pytest.raises(SchedulerError) as e:  # the server's refusal reaches the worker as such
        claim_via_server(w, "default", source=ServerScheduler(live_server.url, "wrong-token"))
    assert e.value.status == 401


# ------------------------------------------------------------------ grant-and-claim
def test_grant_and_claim_takes_the_execution_and_audits_the_reason(client, dashboard_backend):
    c = Client(dashboard_backend)
    c.create(kind="job", lane="default")
    eid = c.create(kind="job", lane="default").execution_id
    r = post(client, f"/v1/executions/{eid}/grant-and-claim", {"lease_duration_ms": 60_000, "reason": "hotfix"})
    assert r.status_code == 200, r.content
    assert set(r.json()) == {"lease_id", "lease_epoch", "attempt_index"}
    assert (r.json()["lease_epoch"], r.json()["attempt_index"]) == (1, 0)
    assert state(dashboard_backend, eid) == "active"
    (entry,) = [e for e in audit.recent(dashboard_backend) if e.action == "grant_and_claim"]
    assert (entry.target, entry.reason) == (eid, "hotfix") and r.json()["lease_id"] in entry.detail
    again = post(client, f"/v1/executions/{eid}/grant-and-claim", {"lease_duration_ms": 60_000, "reason": "x"})
    assert again.status_code == 400 and again.json()["kind"] == "execution_not_eligible"


def test_grant_and_claim_refuses_bad_input_naming_the_field_and_writes_nothing(client, dashboard_backend):
    eid = Client(dashboard_backend).create(kind="job", lane="default").execution_id
    before = keyspace(dashboard_backend)
    for body, field in [({"lease_duration_ms": 0, "reason": "r"}, "lease_duration_ms"),
                        ({"lease_duration_ms": "soon", "reason": "r"}, "lease_duration_ms"),
                        ({"lease_duration_ms": 5000}, "reason"),
                        ({"lease_duration_ms": 5000, "reason": ""}, "reason"),
                        ({"lease_duration_ms": 5000, "reason": "r", "lane_id": "a b"}, "lane_id")]:
        r = post(client, f"/v1/executions/{eid}/grant-and-claim", body)
        assert r.status_code == 422 and field in [f["field"] for f in r.json()["fields"]], (body, r.json())
    r = post(client, "/v1/executions/nope/grant-and-claim", {"lease_duration_ms": 5000, "reason": "r"})
    assert r.status_code == 400 and r.json()["kind"] == "invalid_id"
    r = post(client, f"/v1/executions/{MISSING_EID}/grant-and-claim", {"lease_duration_ms": 5000, "reason": "r"})
    assert r.status_code == 404
    r = post(client, f"/v1/executions/{eid}/grant-and-claim",
             {"lease_duration_ms": 5000, "reason": "r", "lane_id": "elsewhere"})
    assert r.status_code == 400 and r.json()["kind"] == "execution_not_in_eligible_set"
    assert [k for k in changed(before, keyspace(dashboard_backend)) if "audit" not in k] == []
    assert state(dashboard_backend, eid) == "waiting"


def test_the_routes_are_in_the_openapi_schema(client, dashboard_backend):
    paths = client.get("/api/openapi.json").json()["paths"]
    assert "post" in paths["/v1/executions/{execution_id}/grant-and-claim"]
    assert "post" in paths["/v1/workers/{worker_id}/claim"]
