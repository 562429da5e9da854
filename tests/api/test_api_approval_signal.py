"""deliver_approval_signal (#24 item 13, operations §6.8): the REST door, the lane check, the approval
idempotency key, the audit entry, bad input naming the field with nothing written, the Client method."""

from __future__ import annotations

import pytest
from django.test import Client as DjangoClient

from ffcore import audit, keys
from ffcore.errors import InvalidInput
from ffcore.execution.client import Client
from ffcore.keys import ExecKeys
from ffcore.reads import decode_map
from ffcore.suspension.conditions import any_of
from tests.api.helpers import post
from tests.ffcore.suspension_support import claimed, core, with_secrets
from tests.keyspace import MISSING_EID, MISSING_UUID, changed, keyspace

pytestmark = pytest.mark.django_db


@pytest.fixture
def waiting(dashboard_backend):
    """An execution on lane "default" suspended for "approved" or "rejected"."""
    with_secrets(dashboard_backend)
    task = claimed(dashboard_backend)
    out = task.suspend(any_of("approved", "rejected"), reason_code="waiting_for_approval")
    return task.execution_id, out.waitpoint_id


def url(eid: str) -> str:
    return f"/v1/executions/{eid}/approval-signal"


def body(wid: str, **kw):
    return {"lane_id": "default", "waitpoint_id": wid, "signal_name": "approved", "idempotency_suffix": "ticket-7",
            "reason": "looks right", **kw}


def test_an_approval_resumes_without_the_token_and_is_audited(client, waiting, dashboard_backend):
    eid, wid = waiting
    r = post(client, url(eid), body(wid))
    assert r.status_code == 200, r.content
    acc = r.json()["Accepted"]
    assert acc["effect"] == "resume_condition_satisfied"
    assert core(dashboard_backend, eid)["public_state"] == "waiting"
    sig = decode_map(dashboard_backend.client.hgetall(ExecKeys(eid).idx.signal(acc["signal_id"])))
    assert (sig["signal_category"], sig["source_type"], sig["source_identity"], sig["target_scope"],
            sig["idempotency_key"]) == ("approval", "operator", "api-token", "execution", "approval:approved:ticket-7")
    entry = audit.recent(dashboard_backend, count=1)[0]
    assert (entry.actor, entry.action, entry.target, entry.reason, entry.outcome) == (
        "api-token", "approval_signal", eid, "looks right", "ok")
    assert "resume_condition_satisfied" in entry.detail

    again = post(client, url(eid), body(wid))  # the same suffix: the first signal's id, nothing new
    assert again.status_code == 200 and again.json() == {"Duplicate": {"existing_signal_id": acc["signal_id"]}}
    assert dashboard_backend.client.zcard(ExecKeys(eid).signals) == 1


def test_a_lane_mismatch_is_refused_and_changes_nothing(client, waiting, dashboard_backend):
    eid, wid = waiting
    before = keyspace(dashboard_backend)
    r = post(client, url(eid), body(wid, lane_id="other-lane"))
    assert r.status_code == 400 and r.json()["kind"] == "invalid_input"
    assert "lane_mismatch" in r.json()["error"] and "lane_id" in r.json()["error"]
    assert set(changed(before, keyspace(dashboard_backend))) <= {keys.AUDIT_STREAM}  # only the refusal's entry
    assert audit.recent(dashboard_backend, count=1)[0].outcome != "ok"
    assert core(dashboard_backend, eid)["public_state"] == "suspended"


@pytest.mark.parametrize(("change", "field"), [
    ({"idempotency_suffix": ""}, "idempotency_suffix"),
    ({"signal_name": ""}, "signal_name"),
    ({"lane_id": ""}, "lane_id"),
    ({"signal_dedup_ttl_ms": 0}, "signal_dedup_ttl_ms"),
    ({"maxlen": 0}, "maxlen"),
    ({"waitpoint_id": "nope"}, "waitpoint_id"),
])
def test_bad_input_names_the_field(client, waiting, dashboard_backend, change, field):
    eid, wid = waiting
    r = post(client, url(eid), body(wid, **change))
    assert r.status_code in (400, 422), r.content
    assert field in r.content.decode()
    assert core(dashboard_backend, eid)["public_state"] == "suspended"


def test_unknown_execution_or_waitpoint_is_404(client, waiting):
    eid, wid = waiting
    assert post(client, url(MISSING_EID), body(wid)).status_code == 404
    assert post(client, url(eid), body(MISSING_UUID)).status_code == 404


def test_anonymous_callers_and_viewers_are_refused(anon_client, viewer, waiting, dashboard_backend):
    eid, wid = waiting
    assert post(anon_client, url(eid), body(wid)).status_code == 401
    v = DjangoClient()
    v.force_login(viewer)
    assert post(v, url(eid), body(wid)).status_code == 403
    assert core(dashboard_backend, eid)["public_state"] == "suspended"


def test_the_route_is_in_the_openapi(client):
    spec = client.get("/api/openapi.json").json()
    assert "post" in spec["paths"]["/v1/executions/{execution_id}/approval-signal"]


def test_client_method_lane_check_and_idempotent_repeat(waiting, dashboard_backend):
    eid, wid = waiting
    c = Client(dashboard_backend)
    with pytest.raises(InvalidInput, match="lane_mismatch"):
        c.deliver_approval_signal(eid, lane_id="elsewhere", waitpoint_id=wid, signal_name="rejected",
                                  idempotency_suffix="x")
    first = c.deliver_approval_signal(eid, lane_id="default", waitpoint_id=wid, signal_name="rejected",
                                      idempotency_suffix="x")
    assert first.resumed
    dup = c.deliver_approval_signal(eid, lane_id="default", waitpoint_id=wid, signal_name="rejected",
                                    idempotency_suffix="x")
    assert dup.duplicate and dup.signal_id == first.signal_id


def test_a_composites_waitpoints_are_listed_with_their_own_names(client, dashboard_backend):
    from ffcore.suspension.conditions import AllOf, wait_on

    with_secrets(dashboard_backend)
    t = claimed(dashboard_backend)
    t.suspend(AllOf(wait_on("legal", "ok"), wait_on("finance", any_of("ok", "waive"))))
    r = client.get(f"/v1/executions/{t.execution_id}/pending-waitpoints")
    assert r.status_code == 200
    got = {w["waitpoint_key"]: w["required_signal_names"] for w in r.json()}
    assert got == {"legal": ["ok"], "finance": ["ok", "waive"]}
