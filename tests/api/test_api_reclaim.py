"""POST /v1/executions/{id}/reclaim: a reclaim grant for a named worker (upstream v0.13), its refusals, and
the route in the OpenAPI document."""

from __future__ import annotations

from ffcore import audit
from ffcore.execution.client import Client
from ffcore.worker.grant_claim import Claimed, claim_from_reclaim_grant
from ffcore.worker.grants import ReclaimGrant
from ffcore.worker.worker import Registry, Worker, WorkerConfig
from tests.keyspace import MISSING_EID

from .helpers import post

BODY = {"worker_id": "w-api", "worker_instance_id": "wi-api", "reason": "stuck"}


def _revoked(backend) -> str:
    c = Client(backend)
    eid = c.create(kind="job", lane="default").execution_id
    Worker(backend, WorkerConfig(worker_instance_id="wi-old"), Registry()).claim_next(1)
    c.revoke_lease(eid)
    return eid


def test_a_revoked_execution_is_granted_over_rest_and_the_worker_takes_it_over(client, dashboard_backend):
    eid = _revoked(dashboard_backend)
    r = post(client, f"/v1/executions/{eid}/reclaim", BODY)
    assert r.status_code == 200, r.content
    doc = r.json()
    assert doc["outcome"] == "granted" and doc["grant"]["execution_id"] == eid
    (entry,) = [e for e in audit.recent(dashboard_backend) if e.action == "reclaim_grant"]
    assert (entry.target, entry.reason) == (eid, "stuck")
    g = doc["grant"]
    w = Worker(dashboard_backend, WorkerConfig(worker_id="w-api", worker_instance_id="wi-api"), Registry())
    out = claim_from_reclaim_grant(w, ReclaimGrant(g["execution_id"], g["lane_id"], g["grant_key"],
                                                   g["expires_at_ms"]))
    assert isinstance(out, Claimed) and out.task.attempt_index == 1


def test_a_waiting_execution_is_refused_with_409_not_reclaimable(client, dashboard_backend):
    eid = Client(dashboard_backend).create(kind="job", lane="default").execution_id
    r = post(client, f"/v1/executions/{eid}/reclaim", BODY)
    assert r.status_code == 409 and r.json()["outcome"] == "not_reclaimable"
    assert "execution_not_reclaimable" in r.json()["detail"]


def test_bad_input_names_the_field_and_a_missing_execution_is_404(client, dashboard_backend):
    eid = _revoked(dashboard_backend)
    for body, field in [({**BODY, "worker_id": ""}, "worker_id"), ({**BODY, "grant_ttl_ms": 0}, "grant_ttl_ms"),
                        ({**BODY, "max_reclaim_count": 0}, "max_reclaim_count"),
                        ({**BODY, "worker_instance_id": "a b"}, "worker_instance_id")]:
        r = post(client, f"/v1/executions/{eid}/reclaim", body)
        assert r.status_code == 422 and field in [f["field"] for f in r.json()["fields"]], (body, r.json())
    assert post(client, f"/v1/executions/{MISSING_EID}/reclaim", BODY).status_code == 404
    assert Client(dashboard_backend).get_state(eid) == "active"  # nothing granted by the refusals


def test_the_reclaim_route_is_in_the_openapi_document(client):
    doc = client.get("/api/openapi.json")
    assert doc.status_code == 200
    assert "post" in doc.json()["paths"]["/v1/executions/{execution_id}/reclaim"]
