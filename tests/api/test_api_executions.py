"""REST API: execution routes, auth, error shapes (never a 500 on bad input)."""

from __future__ import annotations

import base64
import json
import time

import pytest

from ffcore.execution.client import Client
from ffcore.partition import lane_partition

pytestmark = pytest.mark.django_db

EID = "{fp:86}:6ba7b810-9dad-11d1-80b4-00c04fd430c8"


def post(client, path, body, **extra):
    return client.post(path, json.dumps(body), content_type="application/json", **extra)


def test_create_returns_201_then_200_duplicate_by_idempotency_key(client, dashboard_backend):
    body = {"execution_kind": "k", "lane_id": "default", "idempotency_key": "once", "input_payload": [0, 255, 10]}
    r = post(client, "/v1/executions", body)
    assert r.status_code == 201
    eid = r.json()["Created"]["execution_id"]
    assert r.json()["Created"]["public_state"] == "waiting"
    again = post(client, "/v1/executions", body)
    assert again.status_code == 200 and again.json() == {"Duplicate": {"execution_id": eid}}
    assert Client(dashboard_backend).get_payload(eid) == b"\x00\xff\n"


def test_base64_payloads_keep_binary_bytes(client, dashboard_backend):
    raw = bytes(range(256))
    r = post(client, "/v1/executions", {"execution_kind": "k", "input_payload_b64": base64.b64encode(raw).decode()})
    assert r.status_code == 201
    assert Client(dashboard_backend).get_payload(r.json()["Created"]["execution_id"]) == raw


@pytest.mark.parametrize(("body", "field"), [
    ({"lane_id": "default"}, "execution_kind"),
    ({"execution_kind": "k", "priority": "high"}, "priority"),
    ({"execution_kind": "k", "input_payload": [256]}, "input_payload"),
    ({"execution_kind": "k", "lane_id": "has space"}, "lane_id"),
    ({"execution_kind": "k", "delay_until": -5}, "delay_until"),
])
def test_bad_bodies_are_422_naming_the_field(client, dashboard_backend, body, field):
    r = post(client, "/v1/executions", body)
    assert r.status_code == 422, r.content
    assert field in r.json()["error"]


def test_malformed_json_is_a_4xx_not_a_500(client, dashboard_backend):
    r = client.post("/v1/executions", "{not json", content_type="application/json")
    assert 400 <= r.status_code < 500
    assert "error" in r.json()


def test_bad_ids_are_400_naming_the_value(client, dashboard_backend):
    r = client.get("/v1/executions/not-an-id")
    assert r.status_code == 400
    assert "'not-an-id'" in r.json()["error"]


def test_get_execution_state_and_result(client, dashboard_backend):
    c = Client(dashboard_backend)
    eid = c.create(kind="k").execution_id
    info = client.get(f"/v1/executions/{eid}").json()
    assert info["execution_id"] == eid and info["state_vector"]["public_state"] == "waiting"
    assert info["flow_id"] is None and info["started_at"] is None
    assert client.get(f"/v1/executions/{eid}/state").json() == "waiting"
    assert client.get(f"/v1/executions/{eid}/result").status_code == 404
    assert client.get(f"/v1/executions/{EID}").status_code == 404
    assert client.get(f"/v1/executions/{EID}/state").status_code == 404


def test_list_executions_by_partition_lane_state(client, dashboard_backend):
    c = Client(dashboard_backend)
    eids = []
    for _ in range(3):
        eids.append(c.create(kind="k", lane="api-lane").execution_id)
        time.sleep(0.003)  # distinct created_at: eligible order is FIFO within a priority
    r = client.get(f"/v1/executions?partition={lane_partition('api-lane')}&lane=api-lane&state=eligible&limit=2")
    assert r.status_code == 200
    assert r.json()["total_returned"] == 2
    assert [x["execution_id"] for x in r.json()["executions"]] == eids[:2]
    assert client.get("/v1/executions?partition=1&state=bogus").status_code == 422


def test_without_a_partition_the_list_browses_newest_first_across_partitions_by_cursor(client, dashboard_backend):
    c = Client(dashboard_backend)
    eids = []
    for i, lane in enumerate(("api-a", "api-b", "api-c", "api-a", "api-b")):  # lanes on different partitions
        eids.append(str(c.create(kind="k" if i % 2 else "j", lane=lane, tags={"n": str(i)}).execution_id))
        time.sleep(0.003)
    r = client.get("/v1/executions?limit=2&kind=j")
    body = r.json()
    assert r.status_code == 200 and [x["execution_id"] for x in body["executions"]] == [eids[4], eids[2]]
    assert body["prev_cursor"] is None and body["next_cursor"]
    r = client.get("/v1/executions", {"limit": 2, "kind": "j", "cursor": body["next_cursor"]}).json()
    assert [x["execution_id"] for x in r["executions"]] == [eids[0]] and r["next_cursor"] is None
    back = client.get("/v1/executions", {"limit": 2, "kind": "j", "cursor": r["prev_cursor"], "direction": "prev"})
    assert [x["execution_id"] for x in back.json()["executions"]] == [eids[4], eids[2]]
    lane = client.get("/v1/executions?lane=api-a&order=oldest").json()["executions"]
    assert [x["execution_id"] for x in lane] == [eids[0], eids[3]]
    tagged = client.get("/v1/executions", {"tag": "n=1"}).json()["executions"]
    assert [x["execution_id"] for x in tagged] == [eids[1]]


@pytest.mark.parametrize(("query", "field"), [
    ("state=eligible", "state"), ("offset=3", "offset"), ("limit=501", "limit"),
    ("public_state=asleep", "public_state"),
    ("tag=novalue", "tag"), ("created_from=9&created_to=1", "created_to"), ("cursor=nonsense", "cursor"),
    ("direction=prev", "cursor"),
])
def test_a_bad_browse_parameter_is_a_400_naming_it(client, dashboard_backend, query, field):
    r = client.get("/v1/executions?" + query)
    assert r.status_code == 400 and field in json.dumps(r.json()), r.json()


def test_cancel_priority_replay_revoke(client, dashboard_backend):
    c = Client(dashboard_backend)
    eid = c.create(kind="k").execution_id
    r = client.put(f"/v1/executions/{eid}/priority", json.dumps({"new_priority": 7}), content_type="application/json")
    assert r.status_code == 200 and r.json() == {"Changed": {"execution_id": eid}}
    no_holder = client.post(f"/v1/executions/{eid}/revoke-lease", content_type="application/json")
    assert no_holder.status_code == 404
    r = post(client, f"/v1/executions/{eid}/cancel", {"reason": "api"})
    assert r.json() == {"Cancelled": {"execution_id": eid, "public_state": "cancelled"}}
    again = post(client, f"/v1/executions/{eid}/cancel", {"reason": "api"})
    assert again.status_code == 400
    assert again.json()["kind"] == "execution_not_active" and again.json()["retryable"] is False
    r = client.post(f"/v1/executions/{eid}/replay", content_type="application/json")
    assert r.status_code == 200 and r.json() == {"Replayed": {"public_state": "waiting"}}
    mismatch = post(client, f"/v1/executions/{eid}/cancel", {"reason": "x", "execution_id": EID})
    assert mismatch.status_code == 400


def test_claim_for_worker_grants_or_answers_204(client, dashboard_backend):
    body = {"lane_id": "claims", "worker_instance_id": "wi-1", "grant_ttl_ms": 5000}
    assert post(client, "/v1/workers/w1/claim", body).status_code == 204
    eid = Client(dashboard_backend).create(kind="k", lane="claims").execution_id
    r = post(client, "/v1/workers/w1/claim", body)
    assert r.status_code == 200
    assert r.json()["execution_id"] == eid and r.json()["grant_key"].endswith(":claim_grant")
    assert post(client, "/v1/workers/w1/claim", {**body, "grant_ttl_ms": 0}).status_code == 422
    assert post(client, "/v1/workers/w1/claim", {**body, "capabilities": ["a b"]}).status_code == 422


def test_a_configured_token_is_required_and_compared(client, dashboard_backend, monkeypatch):
    monkeypatch.setenv("FF_API_TOKEN", "s3cret")
    assert client.get(f"/v1/executions/{EID}").status_code == 401
    assert client.get(f"/v1/executions/{EID}", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    assert client.get(f"/v1/executions/{EID}", HTTP_AUTHORIZATION="Bearer s3cret").status_code == 404
    assert client.get("/healthz").status_code == 200


def test_without_a_token_only_loopback_is_served(anon_client, dashboard_backend, monkeypatch):
    monkeypatch.delenv("FF_API_TOKEN", raising=False)
    monkeypatch.setenv("FF_LOOPBACK_READS", "1")
    assert anon_client.get(f"/v1/executions/{EID}", REMOTE_ADDR="10.1.2.3").status_code == 401
    assert anon_client.get(f"/v1/executions/{EID}").status_code == 404  # loopback may read


def test_sessions_need_the_operator_role_to_write(viewer, operator, dashboard_backend, monkeypatch):
    from django.test import Client as DjangoClient

    monkeypatch.setenv("FF_API_TOKEN", "s3cret")
    viewer_client, operator_client = DjangoClient(), DjangoClient()
    viewer_client.force_login(viewer)
    operator_client.force_login(operator)
    eid = Client(dashboard_backend).create(kind="k").execution_id
    assert viewer_client.get(f"/v1/executions/{eid}/state").status_code == 200
    assert post(viewer_client, f"/v1/executions/{eid}/cancel", {"reason": "x"}).status_code == 403
    assert post(operator_client, f"/v1/executions/{eid}/cancel", {"reason": "x"}).status_code == 200
    strict = DjangoClient(enforce_csrf_checks=True)
    strict.force_login(operator)
    assert post(strict, f"/v1/executions/{eid}/replay", {}).status_code == 403  # session writes need CSRF


def test_openapi_schema_and_docs_are_served(client, dashboard_backend):
    schema = client.get("/api/openapi.json").json()
    assert "/v1/executions" in schema["paths"]
    assert client.get("/api/docs").status_code == 200


def test_healthz_and_metrics(client, dashboard_backend):
    Client(dashboard_backend).create(kind="k", lane="metrics-lane")
    assert client.get("/healthz").json() == {"status": "ok"}
    client.get("/v1/executions/" + EID)  # some FCALL traffic
    body = client.get("/metrics").content.decode()
    assert 'ff_executions{lane="metrics-lane",state="eligible"} 1.0' in body
    assert "ff_live_workers" in body
