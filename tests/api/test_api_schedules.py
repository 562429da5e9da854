"""REST /v1/schedules (#26): CRUD and the :pause / :resume / :trigger sub-routes, each write audited with its reason;
bad input is a 4xx naming the field, with nothing written; the routes are in the OpenAPI."""

from __future__ import annotations

import json

import pytest

from ffcore import audit
from ffcore.engine.schedule_scanner import ScheduleScanner
from ffcore.execution.client import Client
from tests.api.helpers import post
from tests.keyspace import keyspace

pytestmark = pytest.mark.django_db

BODY = {"name": "nightly", "spec": {"cron": "0 9 * * 1", "timezone": "Europe/Paris"},
        "template": {"kind": "report", "lane": "reports", "payload": "{}", "priority": 5, "tags": {"team": "a"}},
        "overlap": "skip", "catchup": "skip", "reason": "weekly report"}


def written(backend):
    return {k: v for k, v in keyspace(backend).items() if k != b"ff:audit"}


def test_create_read_list_update_and_delete_a_schedule(client, dashboard_backend):
    r = post(client, "/v1/schedules", BODY)
    assert r.status_code == 201, r.content
    s = r.json()
    assert s["description"] == "At 09:00, only on Monday, Europe/Paris" and len(s["upcoming"]) == 5
    assert s["overlap"] == "skip" and s["catchup"] == "skip" and s["template"]["lane"] == "reports"
    entry = audit.recent(dashboard_backend, count=1)[0]
    assert (entry.action, entry.target, entry.reason, entry.outcome) == (
        "schedule_create", f"schedule:{s['id']}", "weekly report", "ok")
    assert [x["id"] for x in client.get("/v1/schedules").json()] == [s["id"]]
    got = client.get(f"/v1/schedules/{s['id']}").json()
    assert got["runs"] == [] and got["next_fire_at"] == s["upcoming"][0]

    r = client.patch(f"/v1/schedules/{s['id']}", json.dumps({"spec": {"interval_ms": 2000}, "reason": "faster",
                                                             "version": s["version"]}),
                     content_type="application/json")
    assert r.status_code == 200, r.content
    assert r.json()["description"] == "Every 2 s" and r.json()["version"] == s["version"] + 1
    stale = client.patch(f"/v1/schedules/{s['id']}", json.dumps({"overlap": "allow", "reason": "x",
                                                                 "version": s["version"]}),
                         content_type="application/json")
    assert stale.status_code == 409 and stale.json()["kind"] == "schedule_conflict"

    assert client.delete(f"/v1/schedules/{s['id']}?reason=done").status_code == 204
    assert client.get(f"/v1/schedules/{s['id']}").status_code == 404
    assert audit.recent(dashboard_backend, count=1)[0].action == "schedule_delete"


def test_pause_resume_and_trigger_sub_routes(client, dashboard_backend):
    s = post(client, "/v1/schedules", {**BODY, "spec": {"interval_ms": 1000}}).json()
    r = post(client, f"/v1/schedules/{s['id']}:pause", {"reason": "maintenance"})
    assert r.status_code == 200 and r.json()["paused"] and r.json()["upcoming"] == []
    assert ScheduleScanner(dashboard_backend).tick(now_ms=s["next_fire_at"] + 5000) == 0
    r = post(client, f"/v1/schedules/{s['id']}:trigger", {"reason": "now please"})
    assert r.status_code == 200
    eid = r.json()["execution_id"]
    assert Client(dashboard_backend).get_state(eid) == "waiting"
    r = post(client, f"/v1/schedules/{s['id']}:resume", {"reason": "back"})
    assert r.status_code == 200 and not r.json()["paused"] and len(r.json()["upcoming"]) == 5
    runs = client.get(f"/v1/schedules/{s['id']}").json()["runs"]
    assert [(x["outcome"], x["execution_id"], x["state"]) for x in runs] == [("triggered", eid, "waiting")]
    actions = [(e.action, e.reason) for e in audit.recent(dashboard_backend, count=3)]
    assert actions == [("schedule_resume", "back"), ("schedule_trigger", "now please"),
                       ("schedule_pause", "maintenance")]


@pytest.mark.parametrize(("change", "field"), [
    ({"spec": {"cron": "99 * * * *"}}, "spec.cron"),
    ({"spec": {"cron": "0 9 * * *", "timezone": "Nowhere/Town"}}, "spec.timezone"),
    ({"spec": {"interval_ms": 500}}, "spec.interval_ms"),
    ({"template": {"kind": "", "lane": "x"}}, "template.kind"),
    ({"template": {"kind": "k", "lane": "bad lane"}}, "template.lane"),
    ({"template": {"kind": "k", "policy": {"quota_policy_id": "nope"}}}, "template.policy"),
    ({"overlap": "maybe"}, "overlap"),
    ({"catchup": "lots"}, "catchup"),
])
def test_bad_input_is_a_400_naming_the_field_and_writes_nothing(client, dashboard_backend, change, field):
    before = written(dashboard_backend)
    r = post(client, "/v1/schedules", {**BODY, **change})
    assert r.status_code == 400, r.content
    assert r.json()["fields"] == [{"field": field, "message": r.json()["fields"][0]["message"]}]
    assert field in r.json()["error"]
    assert written(dashboard_backend) == before


def test_a_write_without_a_reason_is_refused_naming_reason(client, dashboard_backend):
    s = post(client, "/v1/schedules", BODY).json()
    before = written(dashboard_backend)
    r = post(client, f"/v1/schedules/{s['id']}:pause", {})
    assert r.status_code == 422 and [f["field"] for f in r.json()["fields"]] == ["reason"]
    no_reason = {k: v for k, v in BODY.items() if k != "reason"}
    assert post(client, "/v1/schedules", {**no_reason, "name": "other"}).status_code == 422
    assert client.delete(f"/v1/schedules/{s['id']}").status_code == 422
    assert written(dashboard_backend) == before


def test_unknown_and_malformed_ids_are_404_and_400(client, dashboard_backend):
    assert client.get("/v1/schedules/sch-1-0123456789abcdef").status_code == 404
    assert post(client, "/v1/schedules/sch-1-0123456789abcdef:trigger", {"reason": "x"}).status_code == 404
    assert client.get("/v1/schedules/nonsense").status_code == 400


def test_the_schedule_routes_are_in_the_openapi(client):
    paths = client.get("/api/openapi.json").json()["paths"]
    assert set(paths["/v1/schedules"]) == {"get", "post"}
    assert set(paths["/v1/schedules/{schedule_id}"]) == {"get", "patch", "delete"}
    for verb in ("pause", "resume", "trigger"):
        assert set(paths[f"/v1/schedules/{{schedule_id}}:{verb}"]) == {"post"}
