"""REST API: pending waitpoints, signal delivery, attempt stream read and tail (server.md §3.2 rows 5, 8, 13, 14)."""

from __future__ import annotations

import base64
import threading
import time

import pytest

from dashboard.api import streams as stream_routes
from ffcore.streams.streams import StreamPool
from tests.api.helpers import post
from tests.bounded import join
from tests.ffcore.suspension_support import claimed, core, with_secrets
from tests.keyspace import MISSING_EID, MISSING_UUID, keyspace

pytestmark = pytest.mark.django_db


@pytest.fixture
def suspended(dashboard_backend):
    """A suspended execution waiting for the signal "approve", and its open waitpoint as the API lists it."""
    with_secrets(dashboard_backend)
    task = claimed(dashboard_backend)
    out = task.suspend("approve")
    return task.execution_id, out


def open_wp(client, eid):
    """The execution's first open waitpoint as listed, with its token from the API-token-only route."""
    wp = client.get(f"/v1/executions/{eid}/pending-waitpoints").json()[0]
    r = client.get(f"/v1/executions/{eid}/waitpoints/{wp['waitpoint_id']}/token")
    assert r.status_code == 200 and r["Cache-Control"] == "no-store"
    return {**wp, "waitpoint_token": r.json()["waitpoint_token"]}


def test_pending_waitpoints_lists_the_open_waitpoint_without_its_token(client, suspended):
    eid, _ = suspended
    r = client.get(f"/v1/executions/{eid}/pending-waitpoints")
    assert r.status_code == 200
    [wp] = r.json()
    assert wp["state"] == "active" and wp["execution_id"] == eid
    assert wp["required_signal_names"] == ["approve"]
    assert "waitpoint_token" not in wp and wp["created_at"] > 0
    assert "expires_at" not in wp  # absent optionals are omitted, not null
    token = open_wp(client, eid)["waitpoint_token"]
    kid, digest = token.split(":")
    assert wp["token_kid"] == kid and wp["token_fingerprint"] == digest[:16] and len(digest) == 40


def test_pending_waitpoints_of_unknown_and_malformed_ids(client, dashboard_backend):
    assert client.get(f"/v1/executions/{MISSING_EID}/pending-waitpoints").status_code == 404
    r = client.get("/v1/executions/nope/pending-waitpoints")
    assert r.status_code == 400 and "'nope'" in r.json()["error"]


def test_a_signal_with_the_token_resumes_and_binary_payload_is_kept(client, suspended, dashboard_backend):
    eid, _ = suspended
    wp = open_wp(client, eid)
    raw = bytes(range(256))
    body = {"waitpoint_id": wp["waitpoint_id"], "signal_id": MISSING_UUID, "signal_name": "approve",
            "signal_category": "decision", "source_type": "api", "source_identity": "ann",
            "payload_b64": base64.b64encode(raw).decode(), "waitpoint_token": wp["waitpoint_token"],
            "now": 1}
    r = post(client, f"/v1/executions/{eid}/signal", body)
    assert r.status_code == 200, r.content
    assert r.json() == {"Accepted": {"signal_id": MISSING_UUID, "effect": "resume_condition_satisfied"}}
    assert core(dashboard_backend, eid)["public_state"] == "waiting"
    from ffcore.keys import ExecKeys

    stored = dashboard_backend.client.get(ExecKeys(eid).idx.signal_payload(MISSING_UUID))
    assert stored == raw


def test_a_repeated_idempotency_key_is_a_duplicate(client, suspended):
    eid, _ = suspended
    wp = open_wp(client, eid)
    body = {"waitpoint_id": wp["waitpoint_id"], "signal_name": "note", "waitpoint_token": wp["waitpoint_token"],
            "idempotency_key": "once"}
    first = post(client, f"/v1/executions/{eid}/signal", body).json()["Accepted"]
    assert first["effect"] == "no_op"
    again = post(client, f"/v1/executions/{eid}/signal", body)
    assert again.status_code == 200 and again.json() == {"Duplicate": {"existing_signal_id": first["signal_id"]}}


def test_integer_array_payloads_are_accepted_for_signals(client, suspended, dashboard_backend):
    eid, _ = suspended
    wp = open_wp(client, eid)
    body = {"waitpoint_id": wp["waitpoint_id"], "signal_name": "other", "payload": [0, 159, 146, 150],
            "waitpoint_token": wp["waitpoint_token"]}
    r = post(client, f"/v1/executions/{eid}/signal", body)
    assert r.status_code == 200 and r.json()["Accepted"]["effect"] == "no_op"  # name not expected: no wake


def test_signal_refusals_are_400_with_the_library_code(client, suspended):
    eid, _ = suspended
    wp = open_wp(client, eid)
    body = {"waitpoint_id": wp["waitpoint_id"], "signal_name": "approve", "waitpoint_token": "k1:" + "0" * 40}
    r = post(client, f"/v1/executions/{eid}/signal", body)
    assert r.status_code == 400 and r.json()["kind"] == "invalid_token" and r.json()["retryable"] is False
    r = post(client, f"/v1/executions/{eid}/signal", {**body, "execution_id": MISSING_EID})
    assert r.status_code == 400 and "does not match" in r.json()["error"]


@pytest.mark.parametrize(("patch", "field"), [
    ({"waitpoint_id": "not-a-uuid"}, "waitpoint_id"),
    ({"signal_name": ""}, "signal_name"),
    ({"payload": [1, 300]}, "payload"),
    ({"payload_b64": "***"}, "payload_b64"),
    ({"resume_delay_ms": -1}, "resume_delay_ms"),
    ({"signal_maxlen": 0}, "signal_maxlen"),
    ({"waitpoint_token": 7}, "waitpoint_token"),
])
def test_bad_signal_bodies_are_422_naming_the_field_and_write_nothing(client, suspended, dashboard_backend, patch,
                                                                      field):
    eid, _ = suspended
    wp = open_wp(client, eid)
    body = {"waitpoint_id": wp["waitpoint_id"], "signal_name": "approve", "waitpoint_token": wp["waitpoint_token"]}
    before = keyspace(dashboard_backend)
    r = post(client, f"/v1/executions/{eid}/signal", {**body, **patch})
    assert r.status_code == 422, r.content
    assert field in r.json()["error"]
    assert keyspace(dashboard_backend) == before
    assert core(dashboard_backend, eid)["public_state"] == "suspended"


# ------------------------------------------------------------------ streams
def _frames(dashboard_backend):
    task = claimed(dashboard_backend)
    for payload in (b"one", b"\xff\x00binary", "dré".encode()):
        task.append_frame("log", payload)
    return task


def test_stream_read_returns_frames_in_order_with_exact_bytes(client, dashboard_backend):
    task = _frames(dashboard_backend)
    base = f"/v1/executions/{task.execution_id}/attempts/{task.attempt_index}/stream"
    r = client.get(base)
    assert r.status_code == 200
    body = r.json()
    assert body["count"] == 3 and "closed_at" not in body
    assert [base64.b64decode(f["payload_b64"]) for f in body["frames"]] == [b"one", b"\xff\x00binary", "dré".encode()]
    assert body["frames"][0]["fields"]["payload"] == "one" and body["frames"][2]["fields"]["payload"] == "dré"
    assert "payload" not in body["frames"][1]["fields"]  # not UTF-8: only payload_b64 carries it
    second = body["frames"][1]["id"]
    page = client.get(f"{base}?from={second}&to=%2B&limit=1").json()
    assert [f["id"] for f in page["frames"]] == [second]
    task.complete(b"done")
    closed = client.get(base).json()
    assert closed["closed_reason"] == "attempt_success" and closed["closed_at"] > 0


@pytest.mark.parametrize(("query", "field"), [
    ("limit=0", "limit"), ("limit=1001", "limit"), ("from=abc", "from"), ("to=1-x", "to"), ("limit=ten", "limit"),
])
def test_stream_read_limits_are_422_naming_the_parameter(client, dashboard_backend, query, field):
    r = client.get(f"/v1/executions/{MISSING_EID}/attempts/0/stream?{query}")
    assert r.status_code == 422 and field in r.json()["error"]


@pytest.mark.parametrize(("query", "field"), [
    ("block_ms=30001", "block_ms"), ("after=-", "after"), ("after=%2B", "after"), ("limit=0", "limit"),
    ("block_ms=-1", "block_ms"),
])
def test_stream_tail_limits_are_422_naming_the_parameter(client, dashboard_backend, query, field):
    r = client.get(f"/v1/executions/{MISSING_EID}/attempts/0/stream/tail?{query}")
    assert r.status_code == 422 and field in r.json()["error"]


def test_bad_attempt_index_and_execution_id_are_4xx(client, dashboard_backend):
    assert client.get(f"/v1/executions/{MISSING_EID}/attempts/x/stream").status_code == 422
    assert client.get(f"/v1/executions/{MISSING_EID}/attempts/-1/stream").status_code == 400
    assert client.get("/v1/executions/bad/attempts/0/stream/tail").status_code == 400


def test_tail_returns_frames_after_the_cursor_and_waits_for_new_ones(client, dashboard_backend):
    task = _frames(dashboard_backend)
    base = f"/v1/executions/{task.execution_id}/attempts/{task.attempt_index}/stream/tail"
    first = client.get(f"{base}?limit=2").json()
    assert first["count"] == 2 and "closed_at" not in first
    last = first["frames"][-1]["id"]
    assert client.get(f"{base}?after={last}").json()["count"] == 1
    end = client.get(f"{base}?after={last}").json()["frames"][-1]["id"]
    threading.Timer(0.3, lambda: task.append_frame("log", b"late")).start()
    started = time.monotonic()
    got = client.get(f"{base}?after={end}&block_ms=5000").json()
    assert [base64.b64decode(f["payload_b64"]) for f in got["frames"]] == [b"late"]
    assert time.monotonic() - started < 4.5  # woke by the frame, before block_ms (5 s) ran out


def test_tail_of_a_finished_attempt_answers_at_once(client, dashboard_backend):
    task = _frames(dashboard_backend)
    task.complete(b"")
    started = time.monotonic()
    r = client.get(f"/v1/executions/{task.execution_id}/attempts/0/stream/tail?after=99999999999999&block_ms=30000")
    assert r.status_code == 200 and r.json()["closed_reason"] == "attempt_success"
    assert time.monotonic() - started < 10  # at once, not after block_ms (30 s): generous for a busy machine


def test_a_full_stream_pool_answers_429_and_recovers(client, dashboard_backend, monkeypatch):
    pool = StreamPool(dashboard_backend, max_concurrent=1)
    monkeypatch.setattr(stream_routes, "stream_pool", lambda: pool)
    task = _frames(dashboard_backend)
    end = client.get(f"/v1/executions/{task.execution_id}/attempts/0/stream/tail?limit=1000").json()["frames"][-1]["id"]
    holder = threading.Thread(target=lambda: client.get(
        f"/v1/executions/{task.execution_id}/attempts/0/stream/tail?after={end}&block_ms=3000"), daemon=True)
    holder.start()
    deadline = time.monotonic() + 2
    for _ in range(2):  # past the tail's instant peek: its blocking read now holds the only permit
        while pool._permits._value:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        time.sleep(0.1)
    r = client.get(f"/v1/executions/{task.execution_id}/attempts/0/stream")
    assert r.status_code == 429
    assert r.json()["retryable"] is True and "stream_ops" in r.json()["error"]
    join(holder)
    assert client.get(f"/v1/executions/{task.execution_id}/attempts/0/stream").status_code == 200
    pool.close()
