"""REST: tags after create (#24 item 4), spend and release (#24 item 5), breached_at (#24 item 12)."""

from __future__ import annotations

import pytest

from ffcore import audit
from ffcore.budgets import budgets, spend
from ffcore.engine.budget_scanners import BudgetReconciler
from ffcore.execution import tags as exec_tags
from ffcore.execution.client import Client
from ffcore.flows.flows import Flows
from ffcore.keys import ExecKeys
from ffcore.reads import decode_map
from tests.api.helpers import post
from tests.keyspace import MISSING_EID, MISSING_UUID, keyspace

pytestmark = pytest.mark.django_db


def test_execution_tags_are_set_audited_announced_and_read_back(client, dashboard_backend, monkeypatch):
    eid = Client(dashboard_backend).create(kind="k", tags={"team": "ml"}).execution_id
    published = []
    monkeypatch.setattr(exec_tags.events, "publish", lambda b, **kw: published.append(kw))
    r = post(client, f"/v1/executions/{eid}/tags", {"tags": {"ops.owner": "ana"}, "reason": "handover"})
    assert r.status_code == 200 and r.json() == {"Ok": {"count": 1}}
    assert client.get(f"/v1/executions/{eid}/tags").json() == {"tags": {"ops.owner": "ana", "team": "ml"}}
    e = audit.recent(dashboard_backend, count=1)[0]
    assert (e.actor, e.action, e.target, e.reason, e.outcome) == ("api-token", "set_tags", eid, "handover", "ok")
    assert "ops.owner=ana" in e.detail
    assert published == [{"ids": [eid]}]


@pytest.mark.parametrize(("body", "status", "named", "kind"), [
    ({"tags": {"owner": "ana"}, "reason": "r"}, 400, "owner", "invalid_tag_key"),
    ({"tags": {"ops.fine": "1", "Ops.bad": "2"}, "reason": "r"}, 400, "Ops.bad", "invalid_tag_key"),
    ({"tags": {}, "reason": "r"}, 400, "tags", "invalid_input"),
    ({"tags": {"ops.v": "x" * 5000}, "reason": "r"}, 400, "ops.v", "invalid_input"),
    ({"tags": {"ops.a": "1"}}, 422, "reason", "validation"),
    ({"tags": {"ops.a": 1}, "reason": "r"}, 422, "tags", "validation"),
])
def test_bad_tag_writes_are_refused_naming_the_field_and_change_nothing(client, dashboard_backend, body, status,
                                                                        named, kind):
    eid = Client(dashboard_backend).create(kind="k").execution_id
    fid = Flows(dashboard_backend).create()
    before = keyspace(dashboard_backend)
    for url in (f"/v1/executions/{eid}/tags", f"/v1/flows/{fid}/tags"):
        r = post(client, url, body)
        assert r.status_code == status, r.content
        assert named in r.json()["error"] and r.json()["kind"] == kind
    assert keyspace(dashboard_backend) == before  # no tag, no audit entry


def test_tags_of_unknown_executions_and_flows_are_404_and_write_nothing(client, dashboard_backend):
    before = keyspace(dashboard_backend)
    body = {"tags": {"ops.a": "1"}, "reason": "r"}
    assert post(client, f"/v1/executions/{MISSING_EID}/tags", body).status_code == 404
    assert post(client, f"/v1/flows/{MISSING_UUID}/tags", body).status_code == 404
    assert client.get(f"/v1/flows/{MISSING_UUID}/tags").status_code == 404
    assert client.get(f"/v1/executions/{MISSING_EID}/tags").status_code == 404
    assert keyspace(dashboard_backend) == before
    assert post(client, "/v1/flows/not-a-uuid/tags", body).status_code == 400


def test_flow_tags_are_set_and_audited(client, dashboard_backend):
    fid = Flows(dashboard_backend).create()
    r = post(client, f"/v1/flows/{fid}/tags", {"tags": {"ops.env": "prod"}, "reason": "label"})
    assert r.status_code == 200 and r.json() == {"Ok": {"count": 1}}
    assert client.get(f"/v1/flows/{fid}/tags").json() == {"tags": {"ops.env": "prod"}}
    e = audit.recent(dashboard_backend, count=1)[0]
    assert (e.action, e.target, e.reason) == ("set_flow_tags", fid, "label")


def test_spend_release_and_their_reads(client, dashboard_backend):
    bid, _ = budgets.create_budget(dashboard_backend, hard={"usd": 100}, soft={"usd": 40})
    eid = Client(dashboard_backend).create(kind="k").execution_id
    url = f"/v1/budgets/{bid}/spend"
    assert post(client, url, {"execution_id": eid, "deltas": {"usd": 30}, "idempotency_key": "a"}).json() == "Ok"
    assert post(client, url, {"execution_id": eid, "deltas": {"usd": 30}, "idempotency_key": "a"}).json() == \
        "AlreadyApplied"
    assert post(client, url, {"execution_id": eid, "deltas": {"usd": 20}}).json() == \
        {"SoftBreach": {"dimension": "usd", "current_usage": 50, "soft_limit": 40}}
    assert post(client, url, {"execution_id": eid, "deltas": {"usd": 51}}).json() == \
        {"HardBreach": {"dimension": "usd", "current_usage": 50, "hard_limit": 100}}
    e = audit.recent(dashboard_backend, count=1)[0]
    assert (e.action, e.target) == ("record_spend", f"budget:{bid}") and eid in e.detail
    got = client.get(url).json()
    assert got == {"count": 1, "ledgers": [{"budget_id": bid, "execution_id": eid, "spend": {"usd": 50},
                                            "total": 50}]}
    assert client.get(f"/v1/executions/{eid}/spend").json() == got["ledgers"]
    r = post(client, f"/v1/budgets/{bid}/release", {"execution_id": eid, "reason": "refund"})
    assert r.json() == {"Released": {"budget_id": bid, "execution_id": eid}}
    assert client.get(f"/v1/budgets/{bid}").json()["usage"] == {"usd": 0}
    assert post(client, f"/v1/budgets/{bid}/release", {"execution_id": eid}).json() == \
        {"Noop": {"budget_id": bid, "execution_id": eid}}
    assert client.get(f"/v1/executions/{eid}/spend").json() == []


@pytest.mark.parametrize(("body", "status", "named"), [
    ({"execution_id": "nope", "deltas": {"usd": 1}}, 400, "nope"),
    ({"execution_id": "EID", "deltas": {}}, 400, "deltas"),
    ({"execution_id": "EID", "deltas": {"usd": -1}}, 400, "deltas.usd"),
    ({"execution_id": "EID", "deltas": {"breached_at": 1}}, 400, "deltas.breached_at"),
    ({"execution_id": "EID", "deltas": {"bogus_dim": 5}}, 400, "deltas.bogus_dim"),
    ({"execution_id": "EID", "deltas": {"usd": 1, "bogus_dim": 5}}, 400, "deltas.bogus_dim"),
    ({"execution_id": "EID", "deltas": {"usd": "x"}}, 422, "deltas"),
    ({"deltas": {"usd": 1}}, 422, "execution_id"),
])
def test_bad_spend_is_refused_naming_the_field_and_changes_nothing(client, dashboard_backend, body, status, named):
    bid, _ = budgets.create_budget(dashboard_backend, hard={"usd": 100})
    eid = Client(dashboard_backend).create(kind="k").execution_id
    if body.get("execution_id") == "EID":
        body = {**body, "execution_id": eid}
    before = keyspace(dashboard_backend)
    r = post(client, f"/v1/budgets/{bid}/spend", body)
    assert r.status_code == status, r.content
    assert named in r.json()["error"]
    assert keyspace(dashboard_backend) == before


def test_spend_on_an_unknown_budget_is_404(client, dashboard_backend):
    eid = Client(dashboard_backend).create(kind="k").execution_id
    before = keyspace(dashboard_backend)
    assert post(client, f"/v1/budgets/{MISSING_UUID}/spend", {"execution_id": eid, "deltas": {"x": 1}}).status_code \
        == 404
    assert post(client, f"/v1/budgets/{MISSING_UUID}/release", {"execution_id": eid}).status_code == 404
    assert keyspace(dashboard_backend) == before


def test_budget_status_shows_breached_at_once_the_reconciler_marks_it(client, dashboard_backend):
    bid, _ = budgets.create_budget(dashboard_backend, hard={"usd": 10})
    eid = Client(dashboard_backend).create(kind="k").execution_id
    spend.record_spend(dashboard_backend, bid, eid, {"usd": 10})
    assert client.get(f"/v1/budgets/{bid}").json()["breached_at"] is None
    BudgetReconciler(dashboard_backend).run(1234)
    st = client.get(f"/v1/budgets/{bid}").json()
    assert st["breached_at"] == "1234" and st["usage"] == {"usd": 10}  # a marker, not a dimension
    assert decode_map(dashboard_backend.client.hgetall(ExecKeys(eid).core))["public_state"] == "waiting"
