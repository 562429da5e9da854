"""REST bulk signal (the inbox page's bulk signal through the API): named waitpoints or the inbox filters, one
bulk job run by the page's action (one audit row per job), its progress; bad input is a 4xx naming the field
and sends nothing."""

from __future__ import annotations

import base64
import time

import pytest
from django.test import Client as DjangoClient

from ffcore import audit
from ffcore.execution.client import Client
from ffcore.suspension import hmac_secrets
from ffcore.suspension.signals import RESUMED
from tests.ffcore.suspension_support import SECRET, claimed
from tests.keyspace import MISSING_EID, MISSING_UUID, changed, keyspace

from .helpers import post

pytestmark = pytest.mark.django_db

URL = "/v1/waitpoints/bulk-signal"


@pytest.fixture
def waiting(dashboard_backend):
    """Three executions suspended on "approved" (lane a) and one on "other" (lane b): (eid, wid) each."""
    hmac_secrets.install(dashboard_backend, SECRET)
    out = []
    for name, lane in (("approved", "a"), ("approved", "a"), ("approved", "a"), ("other", "b")):
        t = claimed(dashboard_backend, kind="approve", lane=lane)
        out.append((t.execution_id, t.suspend([name], timeout_ms=600_000).waitpoint_id))
    return out


def _finished(client, job):
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        body = client.get(f"/v1/bulk-jobs/{job}").json()
        if body["state"] == "finished":
            return body
        time.sleep(0.05)
    raise AssertionError("bulk job did not finish")


def _states(backend, waiting):
    c = Client(backend)
    return [c.get_state(e) for e, _ in waiting]


def test_named_waitpoints_are_signalled_by_one_job_with_one_audit_row(client, waiting, dashboard_backend):
    targets = [{"execution_id": e, "waitpoint_id": w} for e, w in waiting[:2]]
    r = post(client, URL, {"signal_name": "approved", "payload_b64": base64.b64encode(b'{"ok":true}').decode(),
                           "targets": targets + targets[:1], "reason": "batch approval"})
    assert r.status_code == 202, r.content
    started = r.json()
    assert started["action"] == "signal" and started["total"] == 2  # the repeat is sent once
    job = _finished(client, started["job_id"])
    assert (job["ok"], job["failed"], job["error"]) == (2, 0, None)
    assert [x["id"] for x in job["results"]] == [e for e, _ in waiting[:2]]
    assert {x["code"] for x in job["results"]} == {RESUMED}
    assert _states(dashboard_backend, waiting) == ["waiting", "waiting", "suspended", "suspended"]
    rows = audit.page(dashboard_backend, audit.AuditFilter()).rows
    assert len(rows) == 1 and rows[0].job == started["job_id"] and rows[0].count == 2
    assert (rows[0].action, rows[0].actor) == ("bulk_signal", "api-token")


def test_a_filter_signals_every_match_and_a_wrong_expected_count_sends_nothing(client, waiting, dashboard_backend):
    body = {"signal_name": "approved", "filter": {"lane": "a"}, "reason": "r"}
    r = post(client, URL, {**body, "expect_count": 2})
    assert r.status_code == 409 and "expect_count" in r.json()["error"] and "3 waitpoints" in r.json()["error"]
    assert set(_states(dashboard_backend, waiting)) == {"suspended"} and audit.recent(dashboard_backend) == []
    r = post(client, URL, {**body, "expect_count": 3})
    assert r.status_code == 202, r.content
    assert _finished(client, r.json()["job_id"])["ok"] == 3
    assert _states(dashboard_backend, waiting) == ["waiting", "waiting", "waiting", "suspended"]


def test_a_refused_target_is_reported_in_the_job_and_the_others_are_signalled(client, waiting, dashboard_backend):
    (e0, w0), (e1, _) = waiting[0], waiting[1]
    r = post(client, URL, {"signal_name": "approved", "targets": [{"execution_id": e0, "waitpoint_id": w0},
                                                                  {"execution_id": e1, "waitpoint_id": w0}]})
    job = _finished(client, r.json()["job_id"])
    assert [(x["id"], x["ok"]) for x in job["results"]] == [(e0, True), (e1, False)]
    assert job["results"][1]["code"] != RESUMED


OK = {"signal_name": "approved", "filter": {"lane": "a"}}
BAD = [
    ({"filter": {"lane": "a"}}, 422, "signal_name"),
    ({**OK, "signal_name": "bad\x01name"}, 422, "signal_name"),
    ({**OK, "payload": [1, 300]}, 422, "payload"),
    ({**OK, "payload_b64": "not base64!"}, 422, "payload_b64"),
    ({**OK, "payload": [1], "payload_b64": "AQ=="}, 400, "payload"),
    ({"signal_name": "approved"}, 400, "targets / filter"),
    ({**OK, "targets": [{"execution_id": MISSING_EID, "waitpoint_id": MISSING_UUID}]}, 400, "targets / filter"),
    ({"signal_name": "approved", "targets": []}, 422, "targets"),
    ({"signal_name": "approved", "targets": "all"}, 422, "targets"),
    ({"signal_name": "approved", "targets": [{"execution_id": "nope", "waitpoint_id": MISSING_UUID}]}, 422,
     "targets.0.execution_id"),
    ({**OK, "filter": {"state": "sideways"}}, 422, "filter.state"),
    ({**OK, "filter": {"execution": "nope"}}, 422, "filter.execution"),
    ({**OK, "filter": {"lane": "nowhere"}}, 400, "filter"),
    ({"signal_name": "approved", "targets": [{"execution_id": "x", "waitpoint_id": "y"}], "expect_count": 1}, 422,
     "targets.0"),
    ({**OK, "expect_count": -1}, 422, "expect_count"),
]


def test_bad_input_is_a_4xx_naming_the_field_and_nothing_is_sent(client, waiting, dashboard_backend):
    (e0, w0) = waiting[0]
    # A good target next to a malformed one: the whole request is refused, the good one is not signalled.
    half = {"signal_name": "approved", "targets": [{"execution_id": e0, "waitpoint_id": w0},
                                                   {"execution_id": e0, "waitpoint_id": "nope"}]}
    before = keyspace(dashboard_backend)
    for body, status, field in [*BAD, (half, 422, "targets.1.waitpoint_id")]:
        r = post(client, URL, body)
        assert r.status_code == status and field in r.json()["error"], (body, r.status_code, r.content)
    assert changed(before, keyspace(dashboard_backend)) == []
    assert audit.recent(dashboard_backend) == []


def test_the_job_route_answers_404_for_an_unknown_job_and_400_for_a_malformed_id(client, dashboard_backend):
    assert client.get(f"/v1/bulk-jobs/{MISSING_UUID}").status_code == 404
    r = client.get("/v1/bulk-jobs/not-a-uuid")
    assert r.status_code == 400 and "job_id" in r.json()["error"]


def test_a_viewer_may_read_a_job_but_not_start_one(viewer, client, waiting, dashboard_backend):
    session = DjangoClient()
    session.force_login(viewer)
    r = post(session, URL, {"signal_name": "approved", "filter": {"lane": "a"}})
    assert r.status_code == 403 and set(_states(dashboard_backend, waiting)) == {"suspended"}
    job = post(client, URL, {"signal_name": "approved", "filter": {"lane": "b"}}).json()["job_id"]
    assert session.get(f"/v1/bulk-jobs/{job}").json()["job_id"] == job
