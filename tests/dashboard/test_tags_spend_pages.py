"""Pages (#24 items 4, 5, 12): tags editable on the execution and flow pages (reason, audit, form errors next to
the field, nothing written on refusal), spend per execution on the execution and budget pages, breached_at."""

from __future__ import annotations

import pytest
from django.urls import reverse

from ffcore import audit
from ffcore.budgets import spend
from ffcore.budgets.budgets import create_budget
from ffcore.engine.budget_scanners import BudgetReconciler
from ffcore.execution.client import Client
from ffcore.flows.flows import Flows
from ffcore.flows.tags import read_flow_tags
from ffcore.keys import ExecKeys
from ffcore.reads import decode_map
from tests.keyspace import keyspace

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


def _tag(client, url, **fields):
    data = {"tag-key": "ops.owner", "tag-value": "ana", "tag-reason": "handover", **fields}
    return client.post(url, data, **HX)


def test_an_operator_sets_an_execution_tag_with_a_reason_and_it_is_audited(operator_client, dashboard_backend):
    eid = Client(dashboard_backend).create(kind="k", tags={"team": "ml"}).execution_id
    page = operator_client.get(reverse("execution", args=[eid])).content.decode()
    assert 'id="tag-form"' in page and 'data-tag="team"' in page
    r = _tag(operator_client, reverse("execution_tags", args=[eid]))
    assert r.status_code == 200
    body = r.content.decode()
    assert "<html" not in body and 'data-tag="ops.owner"' in body and "Tag ops.owner set." in body
    assert decode_map(dashboard_backend.client.hgetall(ExecKeys(eid).tags)) == {"team": "ml", "ops.owner": "ana"}
    e = audit.recent(dashboard_backend, count=1)[0]
    assert (e.actor, e.action, e.target, e.reason, e.outcome) == ("otto", "set_tags", eid, "handover", "ok")
    # without htmx: back to the page, which shows the tag
    r = operator_client.post(reverse("execution_tags", args=[eid]),
                             {"tag-key": "ops.ticket", "tag-value": "T-9", "tag-reason": "r"})
    assert r.status_code == 303 and r["Location"] == reverse("execution", args=[eid])
    assert 'data-tag="ops.ticket"' in operator_client.get(r["Location"]).content.decode()


def test_a_bad_tag_name_is_refused_next_to_its_field_and_the_flow_page_sets_tags(operator_client,
                                                                                 dashboard_backend):
    # (blank, oversized and non-UTF-8 fields, missing reasons and lookalike ids: the form sweep covers them)
    eid = Client(dashboard_backend).create(kind="k").execution_id
    fid = Flows(dashboard_backend).create()
    before = keyspace(dashboard_backend)
    for key in ("owner", "Ops.owner", "ops..x", "ops."):
        for url in (reverse("execution_tags", args=[eid]), reverse("flow_tags", args=[fid])):
            r = _tag(operator_client, url, **{"tag-key": key})
            assert r.status_code == 400 and 'data-error="key"' in r.content.decode(), (key, url)
    assert keyspace(dashboard_backend) == before
    # and the flow page's form works (one page setup for the whole module's operator checks)
    assert 'id="tag-form"' in operator_client.get(reverse("flow", args=[fid])).content.decode()
    r = _tag(operator_client, reverse("flow_tags", args=[fid]), **{"tag-value": "bo"})
    assert r.status_code == 200 and 'data-tag="ops.owner"' in r.content.decode()
    assert read_flow_tags(dashboard_backend, fid) == {"ops.owner": "bo"}
    assert 'data-tag="ops.owner"' in operator_client.get(reverse("flow", args=[fid])).content.decode()
    e = audit.recent(dashboard_backend, count=1)[0]
    assert (e.action, e.target, e.reason) == ("set_flow_tags", fid, "handover")


def test_viewers_see_tags_but_no_form_and_may_not_post(viewer_client, dashboard_backend):
    eid = Client(dashboard_backend).create(kind="k", tags={"team": "ml"}).execution_id
    page = viewer_client.get(reverse("execution", args=[eid])).content.decode()
    assert 'data-tag="team"' in page and 'id="tag-form"' not in page
    assert _tag(viewer_client, reverse("execution_tags", args=[eid])).status_code == 403
    assert decode_map(dashboard_backend.client.hgetall(ExecKeys(eid).tags)) == {"team": "ml"}


def test_spend_shows_on_the_execution_page_and_on_the_budget_page(operator_client, dashboard_backend):
    b = dashboard_backend
    bid, _ = create_budget(b, hard={"usd": 100, "tokens": 0})
    big, small = Client(b).create(kind="llm").execution_id, Client(b).create(kind="llm").execution_id
    spend.record_spend(b, bid, big, {"usd": 40, "tokens": 900})
    spend.record_spend(b, bid, small, {"usd": 5})
    page = operator_client.get(reverse("execution", args=[big])).content.decode()
    section = page[page.index('id="spend"'):]
    assert f'data-budget="{bid}"' in section and "usd 40" in section and "tokens 900" in section
    other = operator_client.get(reverse("execution", args=[Client(b).create(kind="x").execution_id])).content
    assert b"No spend recorded" in other
    page = operator_client.get(reverse("budget", args=[bid])).content.decode()
    table = page[page.index('id="spend"'):]
    assert table.index(big) < table.index(small)  # largest first
    assert 'data-spend-count="2"' in page
    # the budget reconciler's breach marker
    spend.record_spend(b, bid, small, {"usd": 55})  # 100 of 100: at the hard limit
    assert "breached since" not in page
    BudgetReconciler(b).run(b.now_ms())
    page = operator_client.get(reverse("budgets")).content.decode()
    assert f'id="breached-at-{bid}"' in page and "breached since" in page
