"""Issue #20's findings 1–4, written as the attacks they were: each one now fails and changes nothing."""

from __future__ import annotations

import json
import time

import pytest
from django.contrib.auth.models import User
from django.test import Client as DjangoClient

from ffcore import audit, events, keys
from ffcore.budgets import budgets
from ffcore.execution.client import Client
from ffcore.flows.flows import Flows
from ffcore.suspension import hmac_secrets
from tests.api.conftest import API_TOKEN
from tests.api.helpers import post
from tests.dashboard_fixtures import PASSWORD
from tests.ffcore.suspension_support import claimed, with_secrets
from tests.keyspace import MISSING_EID, keyspace
from tests.pubsub_support import confirmed_pubsub

pytestmark = pytest.mark.django_db

CREATE = {"execution_kind": "evil", "lane_id": "default"}
ROTATE = "/v1/admin/rotate-waitpoint-secret"


def raw_post(c: DjangoClient, path: str, body: str, ctype: str, **extra):
    return c.post(path, body, content_type=ctype, **extra)


@pytest.fixture
def suspended(dashboard_backend):
    with_secrets(dashboard_backend)
    task = claimed(dashboard_backend)
    task.suspend("approve")
    wp = dashboard_backend.client.smembers(keys.ExecKeys(task.execution_id).waitpoints)
    wid = next(iter(wp)).decode()
    token = dashboard_backend.client.hget(keys.ExecKeys(task.execution_id).idx.waitpoint(wid), "waitpoint_token")
    return task.execution_id, wid, token.decode()


# ---------------------------------------------------------------- finding 1: drive-by writes
@pytest.mark.parametrize("headers", [
    {"HTTP_ORIGIN": "https://evil.example"},
    {"HTTP_ORIGIN": "http://127.0.0.1:9999"},  # another port of this host: same site, other origin
    {"HTTP_ORIGIN": "null"},  # a sandboxed frame or a file:// page
    {"HTTP_SEC_FETCH_SITE": "cross-site"},
    {"HTTP_SEC_FETCH_SITE": "same-site"},
])
def test_a_request_a_browser_marks_as_foreign_is_refused_even_with_the_token(client, dashboard_backend, headers):
    before = keyspace(dashboard_backend)
    r = post(client, "/v1/executions", CREATE, **headers)
    assert r.status_code == 403 and "cross-" in r.json()["error"]
    assert client.get(f"/v1/executions/{MISSING_EID}", **headers).status_code == 403
    assert keyspace(dashboard_backend) == before


def test_our_own_pages_requests_are_served(client, dashboard_backend):
    r = post(client, "/v1/executions", CREATE, HTTP_ORIGIN="http://testserver", HTTP_SEC_FETCH_SITE="same-origin")
    assert r.status_code == 201


@pytest.mark.parametrize("ctype", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; b=x"])
def test_a_body_that_is_not_declared_json_is_415_and_writes_nothing(client, dashboard_backend, ctype):
    before = keyspace(dashboard_backend)
    r = raw_post(client, "/v1/executions", json.dumps(CREATE), ctype)
    assert r.status_code == 415 and "application/json" in r.json()["error"]
    assert keyspace(dashboard_backend) == before
    assert raw_post(client, "/v1/executions", json.dumps(CREATE), "application/json").status_code == 201


def test_the_reported_drive_by_attack_fails_with_and_without_a_configured_token(anon_client, dashboard_backend,
                                                                              monkeypatch):
    """`fetch()` of a text/plain POST from another site, no cookies: was 201 / 200 with the defaults."""
    with_secrets(dashboard_backend)
    before = keyspace(dashboard_backend)
    for token in ("", API_TOKEN):
        monkeypatch.setenv("FF_API_TOKEN", token)
        for path, body in (("/v1/executions", CREATE), (ROTATE, {"new_kid": "evil", "new_secret_hex": "ab" * 32})):
            r = raw_post(anon_client, path, json.dumps(body), "text/plain;charset=UTF-8",
                         HTTP_ORIGIN="https://evil.example", HTTP_SEC_FETCH_SITE="cross-site")
            assert r.status_code == 403, (token, path, r.content)
            # Even without the browser's headers (curl on this host), a write needs credentials.
            r = post(anon_client, path, body)
            assert r.status_code == 401, (token, path, r.content)
    assert keyspace(dashboard_backend) == before


def test_tokenless_loopback_callers_may_read_and_never_write(anon_client, dashboard_backend, monkeypatch):
    monkeypatch.delenv("FF_API_TOKEN", raising=False)
    monkeypatch.setenv("FF_LOOPBACK_READS", "1")
    eid = Client(dashboard_backend).create(kind="k").execution_id
    assert anon_client.get(f"/v1/executions/{eid}").status_code == 200
    r = post(anon_client, f"/v1/executions/{eid}/cancel", {"reason": "x"})
    assert r.status_code == 401 and "only read" in r.json()["error"]
    assert Client(dashboard_backend).get_state(eid).value == "waiting"
    # With a token configured, tokenless loopback callers do not even read (a proxy makes everyone loopback).
    monkeypatch.setenv("FF_API_TOKEN", API_TOKEN)
    assert anon_client.get(f"/v1/executions/{eid}").status_code == 401


# ---------------------------------------------------------------- finding 2: tokens stay server-side
def test_no_viewer_operator_or_tokenless_caller_ever_sees_a_waitpoint_token(suspended, viewer, operator,
                                                                            anon_client, monkeypatch):
    eid, wid, token = suspended
    digest = token.split(":")[1]
    monkeypatch.delenv("FF_API_TOKEN", raising=False)
    monkeypatch.setenv("FF_LOOPBACK_READS", "1")
    sessions = []
    for user in (viewer, operator):
        c = DjangoClient()
        c.force_login(user)
        sessions.append(c)
    for c in (*sessions, anon_client):
        listed = c.get(f"/v1/executions/{eid}/pending-waitpoints")
        assert listed.status_code == 200 and listed.json()[0]["token_fingerprint"] == digest[:16]
        assert digest not in listed.content.decode()
        r = c.get(f"/v1/executions/{eid}/waitpoints/{wid}/token")
        assert r.status_code == 403 and digest not in r.content.decode()
    for c in sessions:  # the pages neither
        for page in (f"/executions/{eid}/", "/waitpoints/", f"/executions/{eid}/waitpoints/{wid}/"):
            body = c.get(page).content.decode()
            assert digest[:16] not in body, page


def test_the_token_route_hands_the_token_to_the_api_token_and_audits_it(client, suspended, dashboard_backend):
    eid, wid, token = suspended
    r = client.get(f"/v1/executions/{eid}/waitpoints/{wid}/token")
    assert r.status_code == 200 and r.json() == {"waitpoint_id": wid, "waitpoint_token": token}
    assert r["Cache-Control"] == "no-store"
    entry = audit.recent(dashboard_backend, count=1)[0]
    assert (entry.actor, entry.action, entry.target) == ("api-token", "read_waitpoint_token", eid)
    assert wid in entry.detail
    other = "6ba7b811-9dad-11d1-80b4-00c04fd430c8"
    assert client.get(f"/v1/executions/{eid}/waitpoints/{other}/token").status_code == 404


# ---------------------------------------------------------------- finding 3: rotation
def _current_kid(backend) -> str:
    return hmac_secrets.list_kids(backend).current_kid


def test_an_operator_cannot_rotate_and_a_superuser_cannot_choose_the_secret(operator, dashboard_backend):
    with_secrets(dashboard_backend)
    kid = _current_kid(dashboard_backend)
    op = DjangoClient()
    op.force_login(operator)
    assert post(op, ROTATE, {"new_kid": "k9"}).status_code == 403
    boss = User.objects.create_superuser("sue", password=PASSWORD)
    su = DjangoClient()
    su.force_login(boss)
    r = post(su, ROTATE, {"new_kid": "k9", "new_secret_hex": "ab" * 32})
    assert r.status_code == 403 and "only the API token" in r.json()["error"]
    assert _current_kid(dashboard_backend) == kid
    r = post(su, ROTATE, {"reason": "quarterly"})
    assert r.status_code == 200, r.content
    new_kid = r.json()["new_kid"]
    assert new_kid != kid and _current_kid(dashboard_backend) == new_kid
    entry = audit.recent(dashboard_backend, count=1)[0]
    assert (entry.actor, entry.action, entry.target, entry.reason, entry.outcome) == (
        "sue", "rotate_waitpoint_secret", f"kid:{new_kid}", "quarterly", "ok")
    assert "chosen" not in entry.detail


def test_the_api_token_may_choose_the_secret_and_that_is_audited(client, dashboard_backend):
    with_secrets(dashboard_backend)
    r = post(client, ROTATE, {"new_kid": "shared2", "new_secret_hex": "cd" * 32})
    assert r.status_code == 200 and r.json()["new_kid"] == "shared2"
    entry = audit.recent(dashboard_backend, count=1)[0]
    assert (entry.actor, entry.action, entry.outcome) == ("api-token", "rotate_waitpoint_secret", "ok")
    assert "secret chosen by caller" in entry.detail


# ---------------------------------------------------------------- finding 4: every write audited, with its event
def _events(backend):
    ps = confirmed_pubsub(backend.client, keys.EVENTS_CHANNEL)
    while ps.get_message(timeout=0.2) is not None:
        pass

    def seen(within: float = 2.0) -> set[str]:
        out: set[str] = set()
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            events.flush_all()
            m = ps.get_message(timeout=0.1)
            if m is not None:
                ch = events.parse(keys.EVENTS_CHANNEL, m["data"])
                if ch:
                    out |= {str(i) for i in ch.ids} | ch.topics | ch.flows
        return out

    return ps, seen


def test_session_writes_are_audited_with_actor_reason_and_outcome_and_announced(operator, dashboard_backend):
    c = DjangoClient()
    c.force_login(operator)
    cli = Client(dashboard_backend)
    ps, seen = _events(dashboard_backend)
    try:
        eid = cli.create(kind="k").execution_id
        seen(0.3)
        calls = [
            ("change_priority", eid, lambda: c.put(f"/v1/executions/{eid}/priority",
                                                   json.dumps({"new_priority": 3, "reason": "vip"}),
                                                   content_type="application/json")),
            ("cancel", eid, lambda: post(c, f"/v1/executions/{eid}/cancel", {"reason": "vip"})),
            ("replay", eid, lambda: post(c, f"/v1/executions/{eid}/replay", {"reason": "vip"})),
        ]
        for action, target, call in calls:
            r = call()
            assert r.status_code == 200, (action, r.content)
            entry = audit.recent(dashboard_backend, count=1)[0]
            assert (entry.actor, entry.action, entry.target, entry.reason, entry.outcome) == (
                "otto", action, target, "vip", "ok")
            assert target in seen(), action
        bid, _ = budgets.create_budget(dashboard_backend, hard={"tokens": 10})
        assert post(c, f"/v1/budgets/{bid}/reset", {}).status_code == 200  # no reason: optional
        entry = audit.recent(dashboard_backend, count=1)[0]
        assert (entry.actor, entry.action, entry.target, entry.reason) == ("otto", "reset_budget", f"budget:{bid}", "")
        assert {bid, "budgets"} <= seen()  # the budget page's gauges
        r = post(c, "/v1/flows", {"flow_kind": "dag", "reason": "nightly"})
        fid = r.json()["Created"]["flow_id"]
        entry = audit.recent(dashboard_backend, count=1)[0]
        assert (entry.action, entry.target, entry.reason) == ("create_flow", fid, "nightly")
        page = c.get("/audit/").content.decode()  # and the operators' Audit page shows them
        assert all(text in page for text in ("change priority", "reset budget", "create flow", "nightly", "otto"))
    finally:
        ps.close()


def test_a_signal_through_the_api_is_audited(client, suspended, dashboard_backend):
    eid, wid, token = suspended
    body = {"waitpoint_id": wid, "signal_name": "approve", "waitpoint_token": token, "reason": "ok by ann"}
    assert post(client, f"/v1/executions/{eid}/signal", body).status_code == 200
    entry = audit.recent(dashboard_backend, count=1)[0]
    assert (entry.actor, entry.action, entry.target, entry.reason, entry.outcome) == (
        "api-token", "signal", eid, "ok by ann", "ok")
    assert f"waitpoint {wid}" in entry.detail and token not in entry.detail


def test_a_refused_write_is_audited_as_refused_and_an_unknown_id_leaves_no_entry(client, dashboard_backend):
    eid = Client(dashboard_backend).create(kind="k").execution_id
    r = post(client, f"/v1/executions/{eid}/replay", {"reason": "try"})
    assert r.status_code == 400
    entry = audit.recent(dashboard_backend, count=1)[0]
    assert (entry.action, entry.target, entry.outcome) == ("replay", eid, "refused: execution_not_terminal")
    n = len(audit.recent(dashboard_backend, count=100))
    assert post(client, f"/v1/executions/{MISSING_EID}/replay", {}).status_code in (400, 404)
    assert len(audit.recent(dashboard_backend, count=100)) == n


def test_api_creates_and_flow_members_are_audited_with_the_minted_ids(client, dashboard_backend):
    r = post(client, "/v1/executions", {**CREATE, "reason": "backfill"})
    eid = r.json()["Created"]["execution_id"]
    entry = audit.recent(dashboard_backend, count=1)[0]
    assert (entry.action, entry.target, entry.reason) == ("create", eid, "backfill")
    flows = Flows(dashboard_backend)
    fid = flows.create(kind="dag")
    m = Client(dashboard_backend).create(kind="k", execution_id=flows.mint(fid)).execution_id
    assert post(client, f"/v1/flows/{fid}/members", {"execution_id": m, "reason": "wire"}).status_code == 201
    entry = audit.recent(dashboard_backend, count=1)[0]
    assert (entry.action, entry.target, entry.reason) == ("add_flow_member", fid, "wire") and m in entry.detail


@pytest.mark.parametrize("who", ["anonymous", "viewer", "other-origin"])
def test_the_new_admin_doors_give_nothing_to_anonymous_viewers_or_other_origins(who, suspended, viewer, monkeypatch,
                                                                               dashboard_backend):
    """The token route and the rotation, with a token configured: an anonymous client gets 401, a viewer
    session 403, and even the real token from another origin 403 — and nothing is revealed or changed."""
    eid, wid, token = suspended
    monkeypatch.setenv("FF_API_TOKEN", API_TOKEN)
    c = DjangoClient()
    extra: dict[str, str] = {}
    if who == "viewer":
        c.force_login(viewer)
    elif who == "other-origin":
        extra = {"HTTP_AUTHORIZATION": f"Bearer {API_TOKEN}", "HTTP_ORIGIN": "https://evil.example"}
    want = {"anonymous": 401, "viewer": 403, "other-origin": 403}[who]
    kid = hmac_secrets.list_kids(dashboard_backend).current_kid
    r = c.get(f"/v1/executions/{eid}/waitpoints/{wid}/token", **extra)
    assert r.status_code == want and token.split(":")[1] not in r.content.decode()
    r = post(c, ROTATE, {"reason": "x"}, **extra)
    assert r.status_code == want
    assert hmac_secrets.list_kids(dashboard_backend).current_kid == kid
