"""Operator actions on an upstream FlowFabric v0.15.0 deployment (issue #40 item 3): every door goes through
upstream's own functions in their v34 shapes, is audited, and leaves upstream's library byte-for-byte as it
was; what needs a function only ours has is refused in words (pages) or 409 `not_on_upstream` (REST)."""

from __future__ import annotations

import json

import pytest

from ffcore import audit, keys
from ffcore.flows.reads import partition_of
from ffcore.keys import ExecKeys
from tests.upstream_scenario import *  # noqa: F403 - the deployment's fixtures

pytestmark = pytest.mark.django_db
API_TOKEN = "test-api-token"


@pytest.fixture
def api(client, monkeypatch):
    from django.test import Client as DjangoClient

    monkeypatch.setenv("FF_API_TOKEN", API_TOKEN)
    return DjangoClient(HTTP_AUTHORIZATION=f"Bearer {API_TOKEN}")


def _post(c, path: str, body: dict) -> object:
    return c.post(path, json.dumps(body), content_type="application/json")


def _page(c, eid: str, action: str, **data: object) -> object:
    return c.post(f"/executions/{eid}/{action}", {f"{action}-{k}": v for k, v in data.items()},
                  HTTP_HX_REQUEST="true")


def test_cancel_over_rest_goes_through_upstreams_function_and_is_audited(api, upstream, upstream_dashboard):
    eid = upstream.create()
    r = _post(api, f"/v1/executions/{eid}/cancel", {"reason": "duplicate"})
    assert r.status_code == 200, r.content
    core = upstream.core(eid)
    assert (core["lifecycle_phase"], core["terminal_outcome"], core["public_state"]) == (
        "terminal", "cancelled", "cancelled")
    assert upstream.client.zscore(ExecKeys(eid).lane("default").terminal, eid) is not None
    entry = audit.recent(upstream_dashboard)[0]
    assert (entry.action, entry.target, entry.reason, entry.outcome) == ("cancel", eid, "duplicate", "ok")
    assert upstream.library_unchanged()


def test_cancel_from_the_page_needs_a_reason_and_cancels_through_upstream(operator_client, upstream,
                                                                           upstream_dashboard):
    eid = upstream.create()
    assert _page(operator_client, eid, "cancel", reason=" ").status_code == 400
    assert upstream.core(eid)["public_state"] == "waiting"
    r = _page(operator_client, eid, "cancel", reason="stuck")
    assert r.status_code == 200 and "Cancelled." in r.content.decode()
    assert upstream.core(eid)["terminal_outcome"] == "cancelled"
    assert audit.recent(upstream_dashboard)[0].reason == "stuck"
    assert upstream.library_unchanged()


def test_a_signal_with_upstreams_fifteen_keys_resumes_the_waitpoint_and_lands_in_the_delivery_stream(
        api, upstream, upstream_dashboard):
    eid = upstream.create()
    wid = upstream.suspend(eid, "approved")
    assert upstream.core(eid)["public_state"] == "suspended"
    r = _post(api, f"/v1/executions/{eid}/approval-signal",
              {"lane_id": "default", "waitpoint_id": wid, "signal_name": "approved", "idempotency_suffix": "a1",
               "reason": "looks good"})
    assert r.status_code == 200, r.content
    core = upstream.core(eid)
    assert (core["lifecycle_phase"], core["public_state"]) == ("runnable", "waiting")
    delivered = upstream.client.xrange(ExecKeys(eid).idx.signal_delivery)
    assert [e[1][b"execution_id"].decode() for e in delivered] == [eid]
    assert upstream.library_unchanged()


def test_cancelling_a_flow_cancels_every_member_and_drains_the_pending_set(api, upstream, upstream_dashboard):
    fid, members = upstream.flow(3)
    r = _post(api, f"/v1/flows/{fid}/cancel?wait=true", {"reason": "abandoned", "cancellation_policy":
                                                              "cancel_all"})
    assert r.status_code == 200, r.content
    assert sorted(r.json()["Cancelled"]["member_execution_ids"]) == sorted(members)
    assert [upstream.core(e)["terminal_outcome"] for e in members] == ["cancelled"] * 3
    n = partition_of(upstream_dashboard, fid)
    assert upstream.client.scard(keys.flow_pending_cancels(n, fid)) == 0
    assert upstream.client.zscore(keys.cancel_backlog(n), fid) is None
    assert upstream.client.hget(keys.FlowKeys(n, fid).core, "public_flow_state") == b"cancelled"
    assert upstream.library_unchanged()


def test_replay_and_change_priority_go_through_upstreams_functions(api, upstream, upstream_dashboard):
    done, waiting = upstream.create(), upstream.create()
    assert _post(api, f"/v1/executions/{done}/cancel", {"reason": "x"}).status_code == 200
    r = _post(api, f"/v1/executions/{done}/replay", {"reason": "try again"})
    assert r.status_code == 200, r.content
    core = upstream.core(done)
    assert (core["lifecycle_phase"], core["public_state"], core["replay_count"]) == ("runnable", "waiting", "1")
    r = api.put(f"/v1/executions/{waiting}/priority", json.dumps({"new_priority": 7, "reason": "urgent"}),
                content_type="application/json")
    assert r.status_code == 200, r.content
    assert upstream.core(waiting)["priority"] == "7"
    assert [e.action for e in audit.recent(upstream_dashboard)[:3]] == ["change_priority", "replay", "cancel"]
    assert upstream.library_unchanged()


def test_revoke_and_take_now_from_the_page_go_through_upstreams_functions(operator_client, upstream,
                                                                          upstream_dashboard):
    held, free = upstream.create(), upstream.create()
    upstream.take(held)
    r = _page(operator_client, held, "revoke", reason="worker gone")
    assert r.status_code == 200, r.content.decode()
    assert upstream.core(held)["ownership_state"] == "lease_revoked"
    r = _page(operator_client, free, "take", reason="debug it", lease_seconds=60)
    assert r.status_code == 200, r.content.decode()
    assert upstream.core(free)["lifecycle_phase"] == "active"
    assert upstream.library_unchanged()


def test_a_function_only_ours_has_is_a_409_naming_the_upstream_version(api, upstream, upstream_dashboard):
    r = _post(api, "/v1/schedules", {"name": "nightly", "spec": {"cron": "0 9 * * 1"},
                                     "template": {"kind": "report", "lane": "default", "payload": "{}"},
                                     "reason": "weekly report"})
    assert r.status_code == 409, r.content
    body = r.json()
    assert body["kind"] == "not_on_upstream" and body["upstream_version"] == "v0.14-v0.15"
    assert "upstream FlowFabric v0.14-v0.15" in body["error"]
    assert upstream.library_unchanged()


def test_a_page_action_needing_a_function_only_ours_has_says_so_in_words(operator_client, upstream,
                                                                         upstream_dashboard):
    from django.urls import reverse

    from tests.dashboard.schedule_forms import post
    from tests.dashboard.test_schedules_pages import NEW

    r = post(operator_client, reverse("schedule_create"), NEW, "new", htmx=True)
    assert r.status_code == 409, r.content[:500]
    assert "is not available on upstream FlowFabric v0.14-v0.15" in r.content.decode()
    assert audit.recent(upstream_dashboard, count=1)[0].outcome.startswith("refused")
    assert upstream.library_unchanged()


def test_resetting_a_budget_zeroes_upstreams_usage_through_its_function(api, upstream, upstream_dashboard):
    from ffcore import functions as F
    from ffcore.budgets.budgets import budget_keys

    bid = "00000000-0000-4000-8000-0000000000b1"
    b = budget_keys(upstream_dashboard, bid)
    for call in (F.create_budget(b, scope_type="lane", scope_id="default", enforcement_mode="strict",
                                 on_hard_limit="fail", on_soft_limit="continue", reset_interval_ms=0, now_ms=1,
                                 dimensions=["tokens"], hard=[100], soft=[50]),
                 F.report_usage_and_check(b, [("tokens", 40)], now_ms=2)):
        assert upstream.fcall(call.function, call.keys, call.args)[0] in (1, b"OK"), call.function
    assert upstream.client.hget(b.usage, "tokens") == b"40"
    r = _post(api, f"/v1/budgets/{bid}/reset", {"reason": "new month"})
    assert r.status_code == 200, r.content
    assert upstream.client.hget(b.usage, "tokens") == b"0"
    assert audit.recent(upstream_dashboard)[0].action == "reset_budget"
    assert upstream.library_unchanged()


def test_signalling_and_cancelling_a_flow_from_the_pages_go_through_upstreams_functions(operator_client, upstream,
                                                                                        upstream_dashboard):
    from tests.ffcore.flowkit import wait_until

    eid = upstream.create()
    wid = upstream.suspend(eid, "approved")
    r = operator_client.post(f"/waitpoints/{eid}/{wid}/signal", {"name": "approved", "payload": "", "reason": "ok",
                                                                  "idempotency_key": ""}, HTTP_HX_REQUEST="true")
    assert r.status_code == 200, r.content.decode()
    assert upstream.core(eid)["public_state"] == "waiting"
    fid, members = upstream.flow(2)
    r = operator_client.post(f"/flows/{fid}/cancel", {"cancel-reason": "abandoned"}, HTTP_HX_REQUEST="true")
    assert r.status_code == 200, r.content.decode()
    n = partition_of(upstream_dashboard, fid)
    wait_until(lambda: upstream.client.scard(keys.flow_pending_cancels(n, fid)) == 0)
    assert [upstream.core(e)["terminal_outcome"] for e in members] == ["cancelled"] * 2
    assert [e.action for e in audit.recent(upstream_dashboard)[:2]] == ["cancel_flow", "signal"]
    assert upstream.library_unchanged()
