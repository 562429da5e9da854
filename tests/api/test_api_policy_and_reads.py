"""REST: a create's policy fields are honoured or refused with a 400 naming the field (#24 item 6); the
typed reads (#24 item 10)."""

from __future__ import annotations

import json

import pytest

from ffcore.keys import ExecKeys
from tests.keyspace import changed, keyspace

from .helpers import post

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(("policy", "field"), [
    ({"retry_policy": {"max_retries": 1}, "speed": "fast"}, "policy.speed"),
    ({"suspension_policy": {"timeout_behavior": "explode"}}, "policy.suspension_policy.timeout_behavior"),
    ({"stream_policy": {"retention_ttl_ms": "1h"}}, "policy.stream_policy.retention_ttl_ms"),
    ({"routing_requirements": {"isolation_level": "vm"}}, "policy.routing_requirements.isolation_level"),
    ({"max_signals_per_execution": 5}, "policy.max_signals_per_execution"),
    ({"stream_policy": {"durability_mode": "x"}}, "policy.stream_policy.durability_mode"),
])
def test_a_policy_field_we_cannot_honour_is_a_400_naming_it_and_creates_nothing(client, dashboard_backend, policy,
                                                                                 field):
    before = keyspace(dashboard_backend)
    r = post(client, "/v1/executions", {"execution_kind": "k", "policy": policy})
    assert r.status_code == 400, r.content
    assert field in r.json()["error"] and r.json()["kind"] == "invalid_input"
    assert changed(before, keyspace(dashboard_backend)) == []


def test_supported_policy_fields_are_stored_as_given(client, dashboard_backend):
    policy = {"stream_policy": {"durability_mode": "buffered", "retention_maxlen": 20, "retention_ttl_ms": 5000},
              "timeout_policy": {"execution_deadline_ms": 60_000},
              "retry_policy": {"max_retries": 1, "retryable_categories": ["io"],
                               "backoff": {"type": "fixed", "delay_ms": 10}}}
    r = post(client, "/v1/executions", {"execution_kind": "k", "policy": policy})
    assert r.status_code == 201, r.content
    eid = r.json()["Created"]["execution_id"]
    assert json.loads(dashboard_backend.client.get(ExecKeys(eid).policy)) == policy
    assert dashboard_backend.client.zscore(ExecKeys(eid).idx.execution_deadline, eid) is not None


# ------------------------------------------------------------------ typed reads
def test_the_execution_snapshot_route_shows_the_lease_while_held(client, dashboard_backend):
    from ffcore.execution.client import Client
    from ffcore.worker.worker import Registry, Worker, WorkerConfig

    eid = Client(dashboard_backend).create(kind="k", lane="api-snap").execution_id
    r = client.get(f"/v1/executions/{eid}/snapshot")
    assert r.status_code == 200 and r.json()["current_lease"] is None and r.json()["public_state"] == "waiting"
    (task,) = Worker(dashboard_backend, WorkerConfig(lanes=("api-snap",), worker_instance_id="w-api"),
                     Registry()).claim_next(1)
    body = client.get(f"/v1/executions/{eid}/snapshot").json()
    assert body["current_lease"]["lease_id"] == task.lease_id and body["current_lease"]["worker_instance_id"] == "w-api"
    assert body["current_attempt"] == {"attempt_id": task.attempt_id, "attempt_index": 0}
    task.complete()
    assert client.get(f"/v1/executions/{eid}/snapshot").json()["current_lease"] is None
    assert client.get("/v1/executions/{fp:86}:6ba7b810-9dad-11d1-80b4-00c04fd430c8/snapshot").status_code == 404
    assert client.get("/v1/executions/nope/snapshot").status_code == 400


def test_flow_edge_routes_read_groups_edges_by_direction_and_one_edge(client, dashboard_backend):
    from ffcore.flows.flows import Flows

    flows = Flows(dashboard_backend)
    fid = flows.create()
    a, b, c = flows.build(fid, [{"kind": k} for k in "abc"])
    ac, bc = flows.add_edge(fid, a, c), flows.add_edge(fid, b, c)
    snap = client.get(f"/v1/flows/{fid}").json()
    assert snap["flow_id"] == fid and snap["node_count"] == 3
    assert snap["edge_groups"] == [{"downstream_execution_id": c, "policy": {"kind": "all_of"}, "total_deps": 2,
                                    "satisfied_count": 0, "failed_count": 0, "skipped_count": 0, "running_count": 2,
                                    "group_state": "pending", "cancelled_siblings": [],
                                    "sibling_cancelled_count": 0}]
    assert client.get(f"/v1/flows/{fid}/edge-groups").json() == snap["edge_groups"]
    into_c = client.get(f"/v1/flows/{fid}/members/{c}/edges", {"direction": "incoming"}).json()
    assert sorted(e["edge_id"] for e in into_c) == sorted([ac, bc])
    out_a = client.get(f"/v1/flows/{fid}/members/{a}/edges", {"direction": "outgoing"}).json()
    assert [e["downstream_execution_id"] for e in out_a] == [c]
    one = client.get(f"/v1/flows/{fid}/edges/{ac}").json()
    assert (one["upstream_execution_id"], one["downstream_execution_id"], one["edge_state"]) == (a, c, "pending")
    bad = client.get(f"/v1/flows/{fid}/members/{c}/edges", {"direction": "sideways"})
    assert bad.status_code == 422 and "direction" in bad.json()["error"]
    missing = "6ba7b811-9dad-11d1-80b4-00c04fd430c8"
    assert client.get(f"/v1/flows/{missing}").status_code == 404
    assert client.get(f"/v1/flows/{fid}/edges/{missing}").status_code == 404
    assert client.get(f"/v1/flows/{missing}/members/{c}/edges", {"direction": "incoming"}).status_code == 404


def test_the_edge_group_policy_route_sets_before_edges_and_refuses_a_change_after(client, dashboard_backend):
    from ffcore import keys
    from ffcore.flows.flows import Flows

    flows = Flows(dashboard_backend)
    fid = flows.create()
    a, c = flows.build(fid, [{"kind": "a"}, {"kind": "c"}], edges=[(0, 1)])
    path = f"/v1/flows/{fid}/members/{c}/edge-group-policy"
    r = client.put(path, json.dumps({"policy": {"kind": "all_of"}}), content_type="application/json")
    assert r.status_code == 200 and r.json() == "AlreadySet"
    before = keyspace(dashboard_backend)
    r = client.put(path, json.dumps({"policy": {"kind": "quorum", "k": 1, "on_satisfied": "let_run"}}),
                   content_type="application/json")
    assert r.status_code == 400 and "policy.kind" in r.json()["error"] and "already_fixed" in r.json()["error"]
    assert set(changed(before, keyspace(dashboard_backend))) <= {keys.AUDIT_STREAM}  # only the refusal's entry
    (d,) = flows.build(fid, [{"kind": "d"}])
    quorum = {"policy": {"kind": "quorum", "k": 1, "on_satisfied": "let_run"}}
    path_d = f"/v1/flows/{fid}/members/{d}/edge-group-policy"
    r = client.put(path_d, json.dumps(quorum), content_type="application/json")
    assert r.status_code == 200 and r.json() == "Set"
    assert client.get(f"/v1/flows/{fid}/edge-groups").json()[0]["downstream_execution_id"] == c  # no edges yet
    r = client.put(path_d, json.dumps({"policy": {"kind": "quorum", "on_satisfied": "let_run"}}),
                   content_type="application/json")
    assert r.status_code == 400 and "policy.k" in r.json()["error"]
    other = client.put(f"/v1/flows/{fid}/members/{{fp:1}}:6ba7b810-9dad-11d1-80b4-00c04fd430c8/edge-group-policy",
                       json.dumps({"policy": {"kind": "all_of"}}), content_type="application/json")
    assert other.status_code == 400 and other.json()["kind"] == "execution_not_in_flow"
    assert client.put(path, json.dumps({}), content_type="application/json").status_code == 422


def test_the_typed_read_routes_are_in_the_openapi(client, dashboard_backend):
    paths = client.get("/api/openapi.json").json()["paths"]
    for p in ("/v1/executions/{execution_id}/snapshot", "/v1/flows/{flow_id}", "/v1/flows/{flow_id}/edge-groups",
              "/v1/flows/{flow_id}/members/{execution_id}/edges", "/v1/flows/{flow_id}/edges/{edge_id}"):
        assert "get" in paths[p], p
    assert "put" in paths["/v1/flows/{flow_id}/members/{execution_id}/edge-group-policy"]
