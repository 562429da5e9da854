"""REST API, every new route: auth (401/403), malformed JSON, bodies over the cap, and refused input writing nothing."""

from __future__ import annotations

import pytest
from django.test import Client as DjangoClient

from tests.api.helpers import post
from tests.keyspace import MISSING_EID, MISSING_UUID, keyspace

pytestmark = pytest.mark.django_db

WP = MISSING_UUID
#: (method, path, a well-formed body) for every route this module covers.
ROUTES = [
    ("get", f"/v1/executions/{MISSING_EID}/pending-waitpoints", None),
    ("post", f"/v1/executions/{MISSING_EID}/signal", {"waitpoint_id": WP, "signal_name": "a", "waitpoint_token": "t"}),
    ("get", f"/v1/executions/{MISSING_EID}/attempts/0/stream", None),
    ("get", f"/v1/executions/{MISSING_EID}/attempts/0/stream/tail", None),
    ("post", "/v1/flows", {"flow_kind": "k"}),
    ("post", f"/v1/flows/{MISSING_UUID}/members", {"execution_id": MISSING_EID}),
    ("post", f"/v1/flows/{MISSING_UUID}/cancel", {"reason": "r"}),
    ("post", f"/v1/flows/{MISSING_UUID}/edges", {"edge_id": WP, "upstream_execution_id": MISSING_EID,
                                                 "downstream_execution_id": MISSING_EID, "expected_graph_revision": 0}),
    ("post", f"/v1/flows/{MISSING_UUID}/edges/apply", {"edge_id": WP, "upstream_execution_id": MISSING_EID,
                                                       "downstream_execution_id": MISSING_EID, "graph_revision": 0}),
    ("post", "/v1/budgets", {"dimensions": ["t"], "hard_limits": [1], "soft_limits": [0]}),
    ("get", f"/v1/budgets/{MISSING_UUID}", None),
    ("post", f"/v1/budgets/{MISSING_UUID}/usage", {"dimensions": {"t": 1}}),
    ("post", f"/v1/budgets/{MISSING_UUID}/reset", None),
    ("post", "/v1/quotas", {"window_seconds": 1}),
    ("post", "/v1/admin/rotate-waitpoint-secret", {"new_kid": "k9", "new_secret_hex": "abcd"}),
]
WRITES = [r for r in ROUTES if r[0] == "post"]
BODIES = [r for r in WRITES if r[2] is not None]


def call(client, method, path, body, **extra):
    if method == "get":
        return client.get(path, **extra)
    return post(client, path, body if body is not None else {}, **extra)


@pytest.mark.parametrize(("method", "path", "body"), ROUTES)
def test_a_configured_token_is_required_on_every_route(client, dashboard_backend, monkeypatch, method, path, body):
    monkeypatch.setenv("FF_API_TOKEN", "s3cret")
    before = keyspace(dashboard_backend)
    r = call(client, method, path, body)
    assert r.status_code == 401 and r.json() == {"error": "missing or invalid Authorization header"}
    assert call(client, method, path, body, HTTP_AUTHORIZATION="Bearer s3crex").status_code == 401
    assert keyspace(dashboard_backend) == before
    assert call(client, method, path, body, HTTP_AUTHORIZATION="Bearer s3cret").status_code not in (401, 403)


@pytest.mark.parametrize(("method", "path", "body"), WRITES)
def test_a_viewer_session_may_not_write(viewer, dashboard_backend, monkeypatch, method, path, body):
    monkeypatch.setenv("FF_API_TOKEN", "s3cret")
    c = DjangoClient()
    c.force_login(viewer)
    before = keyspace(dashboard_backend)
    r = call(c, method, path, body)
    assert r.status_code == 403 and "operator" in r.json()["error"]
    assert keyspace(dashboard_backend) == before


def test_a_viewer_session_may_read(viewer, dashboard_backend, monkeypatch):
    monkeypatch.setenv("FF_API_TOKEN", "s3cret")
    c = DjangoClient()
    c.force_login(viewer)
    assert c.get(f"/v1/budgets/{MISSING_UUID}").status_code == 404
    assert c.get(f"/v1/executions/{MISSING_EID}/attempts/0/stream").status_code == 200


def test_an_operator_session_may_write(operator, dashboard_backend, monkeypatch):
    monkeypatch.setenv("FF_API_TOKEN", "s3cret")
    c = DjangoClient()
    c.force_login(operator)
    assert post(c, "/v1/flows", {"flow_kind": "k"}).status_code == 201


def test_remote_clients_without_a_token_are_refused(anon_client, dashboard_backend, monkeypatch):
    monkeypatch.delenv("FF_API_TOKEN", raising=False)
    assert anon_client.get(f"/v1/budgets/{MISSING_UUID}", REMOTE_ADDR="192.0.2.7").status_code == 401


@pytest.mark.parametrize(("method", "path", "body"), BODIES)
@pytest.mark.parametrize("raw", ["{not json", "[1, 2]", '"text"', "null", "", '{"a": NaN'])
def test_malformed_json_is_a_4xx_json_error_and_writes_nothing(client, dashboard_backend, method, path, body, raw):
    before = keyspace(dashboard_backend)
    r = client.post(path, raw, content_type="application/json")
    assert r.status_code in (400, 422), (path, raw, r.status_code, r.content)
    assert "error" in r.json()
    assert keyspace(dashboard_backend) == before


def test_malformed_json_says_so(client, dashboard_backend):
    r = client.post("/v1/budgets", "{not json", content_type="application/json")
    assert r.status_code == 400 and r.json()["error"].startswith("invalid JSON")


@pytest.mark.parametrize(("method", "path", "body"), BODIES)
def test_wrong_types_in_every_field_are_422_naming_it(client, dashboard_backend, method, path, body):
    for field in body:
        before = keyspace(dashboard_backend)
        bad = {**body, field: {"nested": [1]}}
        r = post(client, path, bad)
        assert r.status_code == 422, (path, field, r.content)
        assert field in r.json()["error"], (path, field, r.json())
        assert keyspace(dashboard_backend) == before


def test_a_body_over_the_cap_is_413(client, dashboard_backend):
    before = keyspace(dashboard_backend)
    big = '{"signal_name": "a", "payload": [' + ",".join(["1"] * 1_100_000) + "]}"
    r = client.post(f"/v1/executions/{MISSING_EID}/signal", big, content_type="application/json")
    assert r.status_code == 413 and r.json() == {"error": "request body too large"}
    assert keyspace(dashboard_backend) == before


def test_enum_like_strings_and_numbers_out_of_range_are_refused(client, dashboard_backend):
    r = client.get(f"/v1/executions/{MISSING_EID}/attempts/0/stream/tail?block_ms=1e9")
    assert r.status_code == 422 and "block_ms" in r.json()["error"]
    r = post(client, "/v1/quotas", {"window_seconds": 10**30})
    assert r.status_code == 422 and "window_seconds" in r.json()["error"]
    r = post(client, f"/v1/budgets/{MISSING_UUID}/usage", {"dimensions": {"t": 2**64}})
    assert r.status_code == 422 and "dimensions" in r.json()["error"]
