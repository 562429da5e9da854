"""REST /v1/schedules input (#36 Why-4): strict types (no `true` -> 1, no "1000" -> 1000), ASCII-only catch-up,
exact names, every bad field named in one 400; pause/resume that would change nothing is a 409 with no audit entry."""

from __future__ import annotations

import pytest

from ffcore import audit
from ffcore.execution.client import Client
from tests.api.helpers import post
from tests.keyspace import keyspace

pytestmark = pytest.mark.django_db

BODY = {"name": "nightly", "spec": {"cron": "0 9 * * 1", "timezone": "Europe/Paris"},
        "template": {"kind": "report"}, "reason": "weekly report"}


@pytest.mark.parametrize("change, field", [
    ({"catchup": True}, "catchup"),
    ({"catchup": "²"}, "catchup"),
    ({"catchup": "١٢"}, "catchup"),
    ({"catchup": 1.5}, "catchup"),
    ({"name": "nightly\n"}, "name"),
    ({"spec": {"interval_ms": "1000"}}, "spec.interval_ms"),
    ({"spec": {"interval_ms": True}}, "spec.interval_ms"),
    ({"template": {"kind": "report", "priority": "5"}}, "template.priority"),
    ({"paused": "yes"}, "paused"),
])
def test_a_wrongly_typed_or_non_ascii_value_is_a_400_naming_the_field(client, dashboard_backend, change, field):
    before = keyspace(dashboard_backend)
    r = post(client, "/v1/schedules", {**BODY, **change})
    assert r.status_code == 400, r.content
    body = r.json()
    assert [f["field"] for f in body["fields"]] == [field]
    assert "int()" not in body["error"] and "base 10" not in body["error"]
    assert {k: v for k, v in keyspace(dashboard_backend).items() if k != b"ff:audit"} == {
        k: v for k, v in before.items() if k != b"ff:audit"}


def test_every_bad_field_is_in_one_400(client, dashboard_backend):
    r = post(client, "/v1/schedules", {**BODY, "name": "x\n", "overlap": "never", "catchup": True,
                                       "template": {"kind": ""}})
    assert r.status_code == 400, r.content
    assert "fields" in r.json(), r.json()
    assert {f["field"] for f in r.json()["fields"]} == {"name", "overlap", "catchup", "template.kind"}


def test_catchup_as_digits_and_paused_as_a_boolean_are_accepted(client, dashboard_backend):
    r = post(client, "/v1/schedules", {**BODY, "catchup": "12", "paused": True})
    assert r.status_code == 201, r.content
    assert r.json()["catchup"] == "12" and r.json()["paused"] is True


def test_resume_of_an_active_schedule_is_a_409_and_leaves_no_audit_entry(client, dashboard_backend):
    s = Client(dashboard_backend).schedules.create(name="tick", kind="beat", interval_ms=60_000)
    entries = len(audit.recent(dashboard_backend, count=100))
    r = post(client, f"/v1/schedules/{s.id}:resume", {"reason": "go"})
    assert r.status_code == 409 and r.json()["kind"] == "not_applicable"
    assert "already active" in r.json()["error"]
    assert post(client, f"/v1/schedules/{s.id}:pause", {"reason": "quiet"}).status_code == 200
    r = post(client, f"/v1/schedules/{s.id}:pause", {"reason": "quiet again"})
    assert r.status_code == 409 and "already paused" in r.json()["error"]
    after = audit.recent(dashboard_backend, count=100)
    assert [e.action for e in after[: len(after) - entries]] == ["schedule_pause"]  # the one that changed something
