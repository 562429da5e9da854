"""Operator actions: permissions, form errors, engine refusals in words, audit entries."""

import pytest

from ffcore import audit
from ffcore.execution.client import Client

pytestmark = pytest.mark.django_db


def _post(client, eid, action, htmx=True, **data):
    prefix = {"cancel": "cancel", "replay": "replay", "revoke": "revoke", "priority": "priority"}[action]
    payload = {f"{prefix}-{k}": v for k, v in data.items()}
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    return client.post(f"/executions/{eid}/{action}", payload, **headers)


def test_a_viewer_cannot_act(viewer_client, seed, dashboard_backend):
    r = _post(viewer_client, seed.waiting, "cancel", reason="nope")
    assert r.status_code == 403
    assert Client(dashboard_backend).get_state(seed.waiting) == "waiting"


def test_anonymous_posts_are_redirected(client, seed, dashboard_backend):
    r = _post(client, seed.waiting, "cancel", reason="x")
    assert r.status_code == 302
    assert Client(dashboard_backend).get_state(seed.waiting) == "waiting"


def test_actions_need_csrf(operator, seed, dashboard_backend):
    from django.test import Client as DjangoClient

    c = DjangoClient(enforce_csrf_checks=True)
    c.force_login(operator)
    r = c.post(f"/executions/{seed.waiting}/cancel", {"cancel-reason": "x"})
    assert r.status_code == 403
    assert Client(dashboard_backend).get_state(seed.waiting) == "waiting"


def test_cancel_requires_a_reason(operator_client, seed, dashboard_backend):
    r = _post(operator_client, seed.waiting, "cancel", reason="  ")
    assert r.status_code == 400
    assert 'data-error="reason"' in r.content.decode()
    assert Client(dashboard_backend).get_state(seed.waiting) == "waiting"
    assert audit.recent(dashboard_backend) == []


def test_operator_cancels_and_it_is_audited(operator_client, seed, dashboard_backend):
    r = _post(operator_client, seed.waiting, "cancel", reason="duplicate job")
    assert r.status_code == 200
    assert "Cancelled." in r.content.decode()
    assert Client(dashboard_backend).get_state(seed.waiting) == "cancelled"
    entry = audit.recent(dashboard_backend)[0]
    assert (entry.actor, entry.action, entry.target, entry.reason, entry.outcome) == (
        "otto", "cancel", seed.waiting, "duplicate job", "ok")


def test_engine_refusal_is_shown_in_words_and_audited(operator_client, seed, dashboard_backend):
    r = _post(operator_client, seed.completed, "cancel", reason="too late")
    assert r.status_code == 409
    assert "The execution is not active (it already finished: success)." in r.content.decode()
    assert audit.recent(dashboard_backend)[0].outcome == "refused: execution_not_active"


def test_replay_of_a_failed_execution(operator_client, seed, dashboard_backend):
    r = _post(operator_client, seed.failed, "replay", reason="fixed the bug")
    assert r.status_code == 200
    assert Client(dashboard_backend).get_state(seed.failed) == "waiting"
    refused = _post(operator_client, seed.waiting, "replay", reason="again")
    assert refused.status_code == 409
    assert "Only finished executions can be replayed" in refused.content.decode()


def test_change_priority_validates_the_number(operator_client, seed, dashboard_backend):
    bad = _post(operator_client, seed.waiting, "priority", reason="urgent", priority="9001")
    assert bad.status_code == 400
    assert 'data-error="priority"' in bad.content.decode()
    ok = _post(operator_client, seed.waiting, "priority", reason="urgent", priority="100")
    assert ok.status_code == 200
    assert Client(dashboard_backend).get_execution(seed.waiting)["priority"] == "100"
    assert audit.recent(dashboard_backend)[0].detail == "priority=100"


def test_revoke_lease_of_an_active_execution(operator_client, seed, dashboard_backend):
    r = _post(operator_client, seed.active, "revoke", reason="stuck worker")
    assert r.status_code == 200
    ex = Client(dashboard_backend).get_execution(seed.active)
    assert ex["ownership_state"] == "lease_revoked"
    refused = _post(operator_client, seed.waiting, "revoke", reason="no lease")
    assert refused.status_code == 409
    assert "not active" in refused.content.decode()


def test_non_htmx_post_renders_the_whole_page_with_the_outcome(operator_client, seed, dashboard_backend):
    r = _post(operator_client, seed.waiting, "cancel", htmx=False, reason="cleanup")
    html = r.content.decode()
    assert r.status_code == 200 and "<html" in html and "Cancelled." in html


def test_audit_page_lists_actions_newest_first(operator_client, seed, dashboard_backend):
    _post(operator_client, seed.waiting, "cancel", reason="first")
    _post(operator_client, seed.failed, "replay", reason="second")
    html = operator_client.get("/audit/").content.decode()
    assert html.index("second") < html.index("first")
    assert "otto" in html
