"""The waitpoints inbox and the suspension section: listing, filters, operator signal/resume/close, audit."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from ffcore import audit
from ffcore.execution.client import Client
from ffcore.keys import ExecKeys
from ffcore.reads import decode_map
from ffcore.suspension import hmac_secrets
from tests.ffcore.suspension_support import SECRET, claim_again, claimed

pytestmark = pytest.mark.django_db


@dataclass
class Suspended:
    eid: str
    wid: str
    token: str


@pytest.fixture
def suspended(dashboard_backend) -> Suspended:
    hmac_secrets.install(dashboard_backend, SECRET)
    t = claimed(dashboard_backend, kind="approve")
    out = t.suspend(["legal", "finance"], timeout_ms=600_000, reason_code="waiting_for_approval")
    return Suspended(t.execution_id, out.waitpoint_id, out.token)


@pytest.fixture
def pending(dashboard_backend, suspended) -> Suspended:
    t = claimed(dashboard_backend, kind="callback", lane="mail")
    pw = t.create_pending_waitpoint(expires_in_ms=60_000)
    return Suspended(t.execution_id, pw.waitpoint_id, pw.token)


def _signal(client, s: Suspended, htmx=True, **data):
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    body = {"name": "legal", "payload": "", "reason": "ok by phone", "idempotency_key": "", **data}
    return client.post(f"/waitpoints/{s.eid}/{s.wid}/signal", body, **headers)


def test_the_inbox_lists_open_waitpoints_without_tokens(viewer_client, suspended, pending):
    r = viewer_client.get("/waitpoints/")
    assert r.status_code == 200
    html = r.content.decode()
    assert suspended.eid in html and suspended.wid in html and pending.wid in html
    assert "legal" in html and "finance" in html and "all of legal, finance" in html
    assert suspended.token not in html and pending.token not in html
    assert suspended.token.split(":")[1] not in html
    assert "Deliver signal" not in html  # viewers get no forms


def test_inbox_filters_and_paging(viewer_client, suspended, pending):
    r = viewer_client.get("/waitpoints/", {"state": "pending"})
    html = r.content.decode()
    assert pending.wid in html and suspended.wid not in html
    r = viewer_client.get("/waitpoints/", {"lane": "default"})
    assert suspended.wid in r.content.decode() and pending.wid not in r.content.decode()
    r = viewer_client.get("/waitpoints/", {"execution": pending.eid})
    assert pending.wid in r.content.decode() and suspended.wid not in r.content.decode()
    first = viewer_client.get("/waitpoints/", {"limit": "1"})
    assert "Load more" in first.content.decode()
    cursor = first.context["v"].page.next_cursor
    more = viewer_client.get("/waitpoints/", {"limit": "1", "cursor": cursor}, HTTP_HX_REQUEST="true")
    assert more.status_code == 200 and "<html" not in more.content.decode()
    [only] = first.context["v"].page.rows
    other = ({suspended.wid, pending.wid} - {only.waitpoint_id}).pop()
    assert other in more.content.decode() and only.waitpoint_id not in more.content.decode()


@pytest.mark.parametrize(("params", "field"), [({"state": "closed"}, "state"), ({"execution": "nope"}, "execution"),
                                               ({"limit": "0"}, "limit"), ({"cursor": "x"}, "cursor")])
def test_bad_filters_are_shown_next_to_the_field(viewer_client, suspended, params, field):
    r = viewer_client.get("/waitpoints/", params)
    assert r.status_code == 400
    assert f'data-error="{field}"' in r.content.decode()


def test_an_operator_signals_and_it_resumes_when_all_arrived(operator_client, suspended, dashboard_backend):
    r = _signal(operator_client, suspended, name="legal", payload='{"ok": true}', idempotency_key="k1")
    assert r.status_code == 200
    assert "the condition still waits" in r.content.decode()
    assert Client(dashboard_backend).get_state(suspended.eid) == "suspended"
    dup = _signal(operator_client, suspended, name="legal", payload='{"ok": true}', idempotency_key="k1")
    assert "Already delivered" in dup.content.decode()
    r = _signal(operator_client, suspended, name="finance")
    assert "resume condition is satisfied" in r.content.decode()
    assert Client(dashboard_backend).get_state(suspended.eid) == "waiting"
    sigs = claim_again(dashboard_backend, suspended.eid).resume_signals()
    assert [(s.signal_name, s.source_type, s.source_identity) for s in sigs] == [
        ("legal", "operator", "otto"), ("finance", "operator", "otto")]
    assert sigs[0].json() == {"ok": True}
    entries = audit.recent(dashboard_backend)
    assert [(e.action, e.target, e.outcome) for e in entries[:3]] == [("signal", suspended.eid, "ok")] * 3
    assert "signal 'finance'" in entries[0].detail and suspended.token not in entries[0].detail


@pytest.mark.parametrize(("data", "field"), [({"name": ""}, "name"), ({"payload": "{not json"}, "payload"),
                                             ({"reason": " "}, "reason"), ({"name": "a\x01b"}, "name"),
                                             ({"payload": '"' + "x" * 70_000 + '"'}, "payload")])
def test_bad_signal_input_is_shown_next_to_the_field_and_nothing_is_sent(operator_client, suspended,
                                                                        dashboard_backend, data, field):
    r = _signal(operator_client, suspended, **data)
    assert r.status_code == 400
    assert f'data-error="{field}"' in r.content.decode()
    assert dashboard_backend.client.zcard(ExecKeys(suspended.eid).signals) == 0
    assert audit.recent(dashboard_backend) == []


def test_a_viewer_cannot_signal(viewer_client, suspended, dashboard_backend):
    assert _signal(viewer_client, suspended).status_code == 403
    assert dashboard_backend.client.zcard(ExecKeys(suspended.eid).signals) == 0


def test_a_refused_signal_is_explained_and_audited(operator_client, suspended, dashboard_backend):
    Client(dashboard_backend).cancel(suspended.eid, reason="gone")
    r = _signal(operator_client, suspended)
    assert r.status_code == 409
    assert "can no longer be signalled" in r.content.decode()
    assert audit.recent(dashboard_backend)[0].outcome == "refused: target_not_signalable"


def test_a_rotated_out_secret_is_explained(operator_client, suspended, dashboard_backend):
    hmac_secrets.rotate(dashboard_backend, "k2", "ab" * 32, grace_ms=0)
    r = _signal(operator_client, suspended)
    assert r.status_code == 409
    assert "grace window" in r.content.decode()


def test_malformed_ids_are_404_without_writes(operator_client, suspended, dashboard_backend):
    r = operator_client.post(f"/waitpoints/{suspended.eid}/not-a-uuid/signal",
                             {"name": "x", "reason": "r"}, HTTP_HX_REQUEST="true")
    assert r.status_code == 404
    r = operator_client.post("/waitpoints/nope/resume", {"reason": "r"})
    assert r.status_code == 404
    assert Client(dashboard_backend).get_state(suspended.eid) == "suspended"


def test_a_signal_for_another_executions_waitpoint_is_refused(operator_client, suspended, pending, dashboard_backend):
    r = _signal(operator_client, Suspended(pending.eid, suspended.wid, ""))
    assert r.status_code == 404  # names nothing on that execution: bad input, not audited
    assert "No waitpoint with this id belongs to the execution" in r.content.decode()
    assert audit.recent(dashboard_backend) == []
    assert Client(dashboard_backend).get_state(suspended.eid) == "suspended"


def test_an_operator_resumes_without_a_signal(operator_client, suspended, dashboard_backend):
    r = operator_client.post(f"/waitpoints/{suspended.eid}/resume", {"reason": "approved offline"},
                             HTTP_HX_REQUEST="true")
    assert r.status_code == 200 and "Resumed without a signal" in r.content.decode()
    assert Client(dashboard_backend).get_state(suspended.eid) == "waiting"
    again = operator_client.post(f"/waitpoints/{suspended.eid}/resume", {"reason": "again"}, HTTP_HX_REQUEST="true")
    assert again.status_code == 409 and "not suspended" in again.content.decode()
    assert [e.action for e in audit.recent(dashboard_backend)[:2]] == ["resume", "resume"]


def test_an_operator_closes_a_pending_waitpoint_but_not_an_active_one(operator_client, suspended, pending,
                                                                       dashboard_backend):
    r = operator_client.post(f"/waitpoints/{pending.eid}/{pending.wid}/close", {"reason": "stale"},
                             HTTP_HX_REQUEST="true")
    assert r.status_code == 200 and "Waitpoint closed." in r.content.decode()
    wp = decode_map(dashboard_backend.client.hgetall(ExecKeys(pending.eid).idx.waitpoint(pending.wid)))
    assert (wp["state"], wp["close_reason"]) == ("closed", "operator_close")
    r = operator_client.post(f"/waitpoints/{suspended.eid}/{suspended.wid}/close", {"reason": "x"},
                             HTTP_HX_REQUEST="true")
    assert r.status_code == 409 and "signal, resume or cancel" in r.content.decode()
    assert Client(dashboard_backend).get_state(suspended.eid) == "suspended"


def test_without_htmx_the_outcome_gets_its_own_page(operator_client, suspended):
    r = _signal(operator_client, suspended, htmx=False)
    assert r.status_code == 200
    assert "<html" in r.content.decode() and "the condition still waits" in r.content.decode()


def test_the_execution_page_shows_the_suspension_its_condition_and_signals(operator_client, suspended,
                                                                           dashboard_backend):
    _signal(operator_client, suspended, name="legal", payload='{"by": "ann"}')
    _signal(operator_client, suspended, name="other")
    r = operator_client.get(f"/executions/{suspended.eid}/")
    html = r.content.decode()
    assert 'id="suspension"' in html and "waiting for approval" in html
    assert "all of legal, finance" in html and "received ✓" in html
    assert "appended to waitpoint" in html and "no op" in html
    assert f'id="wp-signal-{suspended.wid}"' in html and "Resume without a signal" in html
    assert suspended.token not in html
    assert 'id="why-waitpoint"' in html and "/waitpoints/?execution=" in html  # the why line links the inbox


def test_the_execution_page_shows_the_last_closed_suspension(viewer_client, suspended, operator_client):
    _signal(operator_client, suspended, name="legal")
    _signal(operator_client, suspended, name="finance")
    html = viewer_client.get(f"/executions/{suspended.eid}/").content.decode()
    assert "Last suspension" in html and "resumed" in html
    assert "Deliver signal" not in html
