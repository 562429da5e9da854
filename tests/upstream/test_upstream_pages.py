"""Every page renders against a deployment upstream's v0.15.0 library wrote (issue #40 item 2)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests import upstream_scenario

pytestmark = pytest.mark.django_db


def test_every_page_renders_what_upstream_wrote(viewer_client, reconciled, up_backend, raw):
    digest = upstream_scenario.code_digest(raw)
    m = reconciled
    pages = {
        reverse("home"): ["charts-unavailable", "not available on upstream FlowFabric v0.14-v0.15", "up-wiid-1"],
        reverse("executions"): m.solo,
        reverse("execution", args=[m.suspended]): [m.waitpoint_id],
        reverse("execution", args=[m.running]): ["llm"],
        reverse("execution_history", args=[m.running]): [],
        reverse("flows"): [m.flow_id],
        reverse("flow", args=[m.flow_id]): ["any of 2", m.members["d"]],
        reverse("flow_graph", args=[m.flow_id]): [m.members["d"]],
        reverse("waitpoints"): [m.suspended],
        reverse("budgets"): [m.budget_id],
        reverse("budget", args=[m.budget_id]): ["tokens"],
        reverse("quotas"): [m.quota_id],
        reverse("quota", args=[m.quota_id]): [],
        reverse("workers"): [upstream_scenario.WIID],
        reverse("system"): ["34"],
        reverse("audit"): [],
        reverse("schedules"): [],
        reverse("flow_history", args=[m.flow_id]): ["Edge staged"],
        reverse("stream", args=[m.running, 0]): ["tok1", 'data-mode="summary"', "version 2",
                                                 "&quot;progress&quot;:60", "&quot;step&quot;:&quot;fetch&quot;"],
        reverse("stream", args=[m.best_effort, 0]): ["blip", 'data-mode="best_effort"', "the whole stream expires in"],
    }
    failures = []
    for path, wanted in pages.items():
        r = viewer_client.get(path)
        body = r.content.decode()
        missing = [w for w in wanted if w not in body]
        if r.status_code != 200 or missing:
            failures.append(f"{path}: {r.status_code} missing {missing}")
    assert "\n".join(failures) == ""
    assert upstream_scenario.code_digest(raw) == digest


def _row(html: str, marker: str) -> str:
    start = html.index(marker)
    return html[start: html.index("</tr>", start)]


def test_a_composite_suspension_shows_its_tree_and_ticks_the_satisfied_leaf(viewer_client, reconciled, up_backend,
                                                                           raw):
    m = reconciled
    upstream_scenario.signal(raw, m, "approve")  # one of the two leaves the AllOf needs
    inbox = viewer_client.get(reverse("waitpoints")).content.decode()
    row = _row(inbox, f'data-eid="{m.suspended}"') if f'data-eid="{m.suspended}"' in inbox else inbox
    assert '<span class="sig ok">approve ✓</span>' in row and '<span class="sig">legal</span>' in row
    page = viewer_client.get(reverse("execution", args=[m.suspended])).content.decode()
    wkey = f"wpk:{m.waitpoint_id}"
    assert "received ✓" in _row(page, f'data-matcher="approve on {wkey}"')
    assert "waiting" in _row(page, f'data-matcher="legal on {wkey}"')


def test_the_rest_api_lists_upstreams_executions_newest_first(monkeypatch, reconciled, up_backend):
    from django.test import Client as DjangoClient

    monkeypatch.setenv("FF_API_TOKEN", "t")
    api = DjangoClient(HTTP_AUTHORIZATION="Bearer t")
    r = api.get("/v1/executions", {"limit": 100})
    assert r.status_code == 200, r.content
    body = r.json()
    rows = body.get("executions") or body.get("rows") or body.get("items")
    ids = [x["execution_id"] for x in rows]
    assert sorted(ids) == sorted(reconciled.executions())
    created = [int(x["created_at"]) for x in rows]
    assert created == sorted(created, reverse=True)
    one = api.get(f"/v1/executions/{reconciled.running}")
    assert one.status_code == 200 and one.json()["execution_id"] == reconciled.running


def test_an_id_prefix_finds_an_upstream_execution(viewer_client, reconciled, up_backend):
    prefix = reconciled.running.rpartition(":")[2][:8]
    r = viewer_client.get(reverse("search"), {"q": prefix}, follow=True)
    assert r.status_code == 200
    assert reconciled.running in r.content.decode()


def test_before_the_first_reconciler_pass_the_list_says_why_it_is_empty(viewer_client, made, up_backend):
    html = viewer_client.get(reverse("executions")).content.decode()
    assert 'id="list-note"' in html and "first pass has not finished" in html
    assert not any(e in html for e in made.executions())
    from ffcore.upstream.reconcile import reconcile_once

    reconcile_once(up_backend)
    html = viewer_client.get(reverse("executions")).content.decode()
    assert 'id="list-note"' not in html and all(e in html for e in made.executions())


def test_the_history_of_an_upstream_execution_is_derived_from_its_records(viewer_client, reconciled, up_backend,
                                                                         raw):
    upstream_scenario.signal(raw, reconciled, "approve")
    html = viewer_client.get(reverse("execution_history", args=[reconciled.suspended])).content.decode()
    what = [w for w in ("Created", "Claimed", "Suspended", "Signal &#x27;approve&#x27; delivered") if w not in html]
    assert what == []
