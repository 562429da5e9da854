"""REST API: budgets, quota policies and the waitpoint-secret rotation (server.md §3.2 rows 20–25)."""

from __future__ import annotations

import time

import pytest

from dashboard.api import admin as admin_routes
from ffcore.budgets import quotas
from ffcore.ids import new_uuid
from ffcore.suspension import hmac_secrets
from tests.api.helpers import post
from tests.ffcore.suspension_support import SECRET
from tests.keyspace import MISSING_UUID, keyspace

pytestmark = pytest.mark.django_db

BUDGET = {"scope_type": "tenant", "scope_id": "acme", "enforcement_mode": "strict", "on_hard_limit": "block",
          "on_soft_limit": "warn", "reset_interval_ms": 0, "dimensions": ["tokens", "usd"],
          "hard_limits": [100, 0], "soft_limits": [50, 0], "now": 1_700_000_000_000}


def _budget(client, **over):
    r = post(client, "/v1/budgets", {**BUDGET, **over})
    assert r.status_code == 201, r.content
    return r.json()["Created"]["budget_id"]


def test_create_budget_is_201_then_200_and_status_reads_back(client, dashboard_backend):
    bid = new_uuid()
    assert _budget(client, budget_id=bid) == bid
    again = post(client, "/v1/budgets", {**BUDGET, "budget_id": bid})
    assert again.status_code == 200 and again.json() == {"AlreadySatisfied": {"budget_id": bid}}
    st = client.get(f"/v1/budgets/{bid}").json()
    assert st["scope_type"] == "tenant" and st["scope_id"] == "acme" and st["enforcement_mode"] == "strict"
    assert st["usage"] == {"tokens": 0, "usd": 0}
    assert st["hard_limits"] == {"tokens": 100, "usd": 0} and st["soft_limits"] == {"tokens": 50, "usd": 0}
    assert st["breach_count"] == 0 and st["last_breach_at"] is None and st["created_at"] == "1700000000000"


def test_usage_reports_ok_soft_and_hard_breaches_and_dedups(client, dashboard_backend):
    bid = _budget(client)
    url = f"/v1/budgets/{bid}/usage"
    assert post(client, url, {"dimensions": {"tokens": 10}, "now": 1, "dedup_key": "r1"}).json() == "Ok"
    assert post(client, url, {"dimensions": {"tokens": 10}, "now": 1, "dedup_key": "r1"}).json() == "AlreadyApplied"
    soft = post(client, url, {"dimensions": {"tokens": 45}})
    assert soft.status_code == 200
    assert soft.json() == {"SoftBreach": {"dimension": "tokens", "current_usage": 55, "soft_limit": 50}}
    hard = post(client, url, {"dimensions": {"tokens": 46, "usd": 1}})
    assert hard.json() == {"HardBreach": {"dimension": "tokens", "current_usage": 55, "hard_limit": 100}}
    st = client.get(f"/v1/budgets/{bid}").json()
    assert st["usage"] == {"tokens": 55, "usd": 0}  # the hard breach applied nothing
    assert st["breach_count"] == 1 and st["last_breach_dim"] == "tokens"


def test_reset_zeroes_usage_and_reports_the_next_reset(client, dashboard_backend):
    bid = _budget(client, reset_interval_ms=60_000)
    post(client, f"/v1/budgets/{bid}/usage", {"dimensions": {"tokens": 30}})
    r = client.post(f"/v1/budgets/{bid}/reset", content_type="application/json")
    assert r.status_code == 200
    assert r.json()["Reset"]["next_reset_at"] > dashboard_backend.now_ms()
    assert client.get(f"/v1/budgets/{bid}").json()["usage"]["tokens"] == 0


def test_unknown_budgets_are_404_and_nothing_is_written(client, dashboard_backend):
    before = keyspace(dashboard_backend)
    assert client.get(f"/v1/budgets/{MISSING_UUID}").status_code == 404
    assert post(client, f"/v1/budgets/{MISSING_UUID}/usage", {"dimensions": {"x": 1}}).status_code == 404
    assert client.post(f"/v1/budgets/{MISSING_UUID}/reset", content_type="application/json").status_code == 404
    assert keyspace(dashboard_backend) == before
    r = client.get("/v1/budgets/not-a-uuid")
    assert r.status_code == 400 and "'not-a-uuid'" in r.json()["error"]


@pytest.mark.parametrize(("patch", "field"), [
    ({"hard_limits": [1]}, "hard_limits"),
    ({"soft_limits": [200, 0]}, "soft limit of tokens"),
    ({"dimensions": ["a", "a"]}, "dimensions"),
    ({"dimensions": []}, "dimensions"),
    ({"hard_limits": [-1, 0]}, "hard_limits"),
    ({"reset_interval_ms": "daily"}, "reset_interval_ms"),
    ({"budget_id": "nope"}, "budget_id"),
    ({"dimensions": ["tok\x00ens", "usd"]}, "dimensions"),
])
def test_bad_budget_bodies_are_422_naming_the_field_and_write_nothing(client, dashboard_backend, patch, field):
    before = keyspace(dashboard_backend)
    r = post(client, "/v1/budgets", {**BUDGET, **patch})
    assert r.status_code == 422, r.content
    assert field in r.text
    assert keyspace(dashboard_backend) == before


def test_bad_usage_bodies_are_422(client, dashboard_backend):
    bid = _budget(client)
    for body, field in (({"dimensions": {}}, "dimensions"), ({"dimensions": {"t": -1}}, "dimensions"),
                        ({"dimensions": {"t": "many"}}, "dimensions"), ({"dimensions": {"t": 1}, "now": -5}, "now")):
        r = post(client, f"/v1/budgets/{bid}/usage", body)
        assert r.status_code == 422 and field in r.json()["error"], (body, r.content)


def test_quota_policies_are_201_then_200(client, dashboard_backend):
    qid = new_uuid()
    body = {"quota_policy_id": qid, "window_seconds": 60, "max_requests_per_window": 10, "max_concurrent": 2, "now": 5}
    r = post(client, "/v1/quotas", body)
    assert r.status_code == 201 and r.json() == {"Created": {"quota_policy_id": qid}}
    assert post(client, "/v1/quotas", body).status_code == 200
    d = quotas.read_defs(dashboard_backend, [qid])[qid]
    assert (d.window_seconds, d.max_requests, d.cap) == (60, 10, 2)
    minted = post(client, "/v1/quotas", {"window_seconds": 1})
    assert minted.status_code == 201
    bad = post(client, "/v1/quotas", {"window_seconds": 0, "max_requests_per_window": 5})
    assert bad.status_code == 400 and bad.json()["kind"] == "invalid_input"
    assert post(client, "/v1/quotas", {"window_seconds": -1}).status_code == 422


def test_rotation_makes_the_new_kid_current_and_converges_on_rerun(client, dashboard_backend):
    hmac_secrets.install(dashboard_backend, SECRET)
    body = {"new_kid": "k2", "new_secret_hex": "ab" * 32}
    r = post(client, "/v1/admin/rotate-waitpoint-secret", body)
    n = dashboard_backend.settings.partitions.flow
    assert r.status_code == 200 and r.json() == {"rotated": n, "failed": [], "in_progress": [], "new_kid": "k2"}
    assert hmac_secrets.list_kids(dashboard_backend).current_kid == "k2"
    assert post(client, "/v1/admin/rotate-waitpoint-secret", body).json()["rotated"] == n  # safe retry
    conflict = post(client, "/v1/admin/rotate-waitpoint-secret", {**body, "new_secret_hex": "cd" * 32})
    assert conflict.status_code == 400 and "rotation_conflict" in conflict.json()["error"]


@pytest.mark.parametrize(("body", "field"), [
    ({"new_kid": "a:b", "new_secret_hex": "abcd"}, "new_kid"),
    ({"new_kid": "k2", "new_secret_hex": "abc"}, "new_secret_hex"),
    ({"new_kid": "k2", "new_secret_hex": "zz"}, "new_secret_hex"),
    ({"new_kid": "", "new_secret_hex": "abcd"}, "new_kid"),
])
def test_bad_rotation_input_is_422_and_writes_nothing(client, dashboard_backend, body, field):
    hmac_secrets.install(dashboard_backend, SECRET)
    before = keyspace(dashboard_backend)
    r = post(client, "/v1/admin/rotate-waitpoint-secret", body)
    assert r.status_code == 422 and field in r.json()["error"]
    assert keyspace(dashboard_backend) == before


def test_a_second_rotation_while_one_runs_is_429(client, dashboard_backend):
    assert admin_routes._rotating.acquire(blocking=False)
    try:
        r = post(client, "/v1/admin/rotate-waitpoint-secret", {"new_kid": "k2", "new_secret_hex": "ab" * 32})
    finally:
        admin_routes._rotating.release()
    assert r.status_code == 429 and r.json()["retryable"] is True and "admin_rotate" in r.json()["error"]


def test_a_rotation_past_its_cap_is_504_and_still_finishes_in_the_background(client, dashboard_backend, monkeypatch):
    hmac_secrets.install(dashboard_backend, SECRET)
    monkeypatch.setattr(admin_routes, "ROTATE_TIMEOUT_S", 0.3)
    dashboard_backend.client.execute_command("CLIENT", "PAUSE", 1500, "WRITE")  # Valkey holds every write
    r = post(client, "/v1/admin/rotate-waitpoint-secret", {"new_kid": "k3", "new_secret_hex": "ab" * 32})
    assert r.status_code == 504 and "retry is safe" in r.json()["error"] and r.json()["retryable"] is True
    deadline = time.monotonic() + 10
    while hmac_secrets.list_kids(dashboard_backend).current_kid != "k3" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert hmac_secrets.list_kids(dashboard_backend).current_kid == "k3"
    while admin_routes._rotating.locked() and time.monotonic() < deadline:
        time.sleep(0.05)
    again = post(client, "/v1/admin/rotate-waitpoint-secret", {"new_kid": "k3", "new_secret_hex": "ab" * 32})
    assert again.status_code == 200 and again.json()["new_kid"] == "k3"
