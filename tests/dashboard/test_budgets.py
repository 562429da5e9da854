"""Budgets and quotas pages: gauges per dimension coloured by breach, blocked executions, the audited
reset, and the execution detail naming (and linking) what holds an execution back."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from ffcore import audit
from ffcore.budgets.budgets import create_budget, report_usage
from ffcore.budgets.quotas import create_quota_policy
from ffcore.execution.client import Client
from ffcore.policy import Policy
from ffcore.worker.worker import Worker, WorkerConfig

pytestmark = pytest.mark.django_db


@pytest.fixture
def held(dashboard_backend):
    """A budget at its hard limit holding one execution back, and another budget with room."""
    b = dashboard_backend
    bid, _ = create_budget(b, hard={"tokens": 100, "calls": 10}, soft={"tokens": 50}, reset_interval_ms=3_600_000)
    report_usage(b, bid, {"tokens": 100, "calls": 2})
    ok, _ = create_budget(b, hard={"tokens": 100}, soft={"tokens": 80})
    report_usage(b, ok, {"tokens": 90})
    eid = Client(b).create(kind="llm", policy=Policy(budget_ids=(bid,))).execution_id
    assert Worker(b, WorkerConfig(worker_id="w")).claim_next(1) == []
    return bid, ok, eid


def _card(html: str, budget_id: str) -> str:
    card = html[html.index(f'id="budget-{budget_id}"'):]
    return card[:card.index("</section>")]


def _row(html: str, budget_id: str, dim: str) -> str:
    card = _card(html, budget_id)
    m = re.search(rf'<tr data-dim="{dim}" data-state="(\w+)">.*?</tr>', card, re.S)
    assert m, f"no row for {dim}"
    return m.group(0)


def test_the_budgets_page_shows_one_gauge_per_dimension_coloured_by_breach(viewer_client, held):
    bid, ok, _ = held
    html = viewer_client.get("/budgets/").content.decode()
    tokens = _row(html, bid, "tokens")
    assert 'data-state="hard"' in tokens and 'value="100"' in tokens and 'max="100"' in tokens
    assert 'class="gauge lim-hard"' in tokens and ">100 / 50 / 100<" in tokens
    assert 'data-state="ok"' in _row(html, bid, "calls")
    assert 'data-state="soft"' in _row(html, ok, "tokens")
    assert 'data-blocked="1"' in _card(html, bid) and 'data-blocked="0"' in _card(html, ok)
    assert 'data-state="hard"' in _card(html, bid)[:200]


def test_a_budget_page_lists_blocked_executions_and_the_next_reset(viewer_client, held):
    bid, _, eid = held
    r = viewer_client.get(f"/budgets/{bid}/")
    html = r.content.decode()
    assert r.status_code == 200
    assert f'href="{reverse("execution", args=[eid])}"' in html and "tokens at its hard limit (100/100)" in html
    assert "next reset" in html and "never" not in html.split("next reset")[1][:80]
    assert 'id="budget-reset"' not in html  # viewers see no reset form


def test_unknown_or_malformed_ids_are_404(viewer_client, dashboard_backend):
    assert viewer_client.get("/budgets/not-a-uuid/").status_code == 404
    assert viewer_client.get("/budgets/00000000-0000-4000-8000-000000000000/").status_code == 404
    assert viewer_client.get("/quotas/zzz/").status_code == 404


def test_the_gauges_partial_is_served_for_htmx_polls(viewer_client, held):
    bid, _, _ = held
    r = viewer_client.get(f"/budgets/{bid}/", HTTP_HX_REQUEST="true")
    html = r.content.decode()
    assert html.lstrip().startswith('<div id="budget-cards"') and "<html" not in html


def test_an_operator_resets_a_budget_with_a_reason_and_it_is_audited(operator_client, held, dashboard_backend):
    bid, _, eid = held
    r = operator_client.post(f"/budgets/{bid}/reset", {"reset-reason": "new billing month"}, HTTP_HX_REQUEST="true")
    assert r.status_code == 200
    assert "Budget reset; 1 blocked execution(s) may run again." in r.content.decode()
    assert Client(dashboard_backend).get_state(eid) == "waiting"
    (entry,) = audit.recent(dashboard_backend)
    assert (entry.action, entry.target, entry.reason, entry.outcome) == \
        ("reset_budget", f"budget:{bid}", "new billing month", "ok")


def test_a_reset_without_a_reason_changes_nothing(operator_client, held, dashboard_backend):
    bid, _, eid = held
    r = operator_client.post(f"/budgets/{bid}/reset", {"reset-reason": " "}, HTTP_HX_REQUEST="true")
    assert r.status_code == 400 and 'data-error="reason"' in r.content.decode()
    assert Client(dashboard_backend).get_state(eid) == "rate_limited"
    assert audit.recent(dashboard_backend) == []


def test_viewers_cannot_reset(viewer_client, held, dashboard_backend):
    bid, _, eid = held
    assert viewer_client.post(f"/budgets/{bid}/reset", {"reset-reason": "x"}).status_code == 403
    assert Client(dashboard_backend).get_state(eid) == "rate_limited"


def test_resetting_an_unknown_budget_is_refused_without_creating_it(operator_client, dashboard_backend):
    from ffcore.budgets import budgets

    bid = "00000000-0000-4000-8000-0000000000aa"
    r = operator_client.post(f"/budgets/{bid}/reset", {"reset-reason": "x"}, HTTP_HX_REQUEST="true")
    assert r.status_code == 404
    assert budgets.list_budget_ids(dashboard_backend) == []


def test_the_execution_detail_names_and_links_the_budget_that_blocks_it(viewer_client, held):
    bid, _, eid = held
    html = viewer_client.get(f"/executions/{eid}/").content.decode()
    why = html[html.index('id="admission-why"'):]
    assert f'<a class="mono" href="/budgets/{bid}/">{bid}</a>' in why[:600]
    assert "tokens at its hard limit (100/100)" in why[:800]


def test_the_execution_detail_names_and_links_the_quota_that_blocks_it(viewer_client, dashboard_backend):
    b = dashboard_backend
    qid, _ = create_quota_policy(b, window_seconds=0, max_concurrent=1)
    c = Client(b)
    eids = [c.create(kind="job", policy=Policy(quota_policy_id=qid)).execution_id for _ in range(2)]
    (t,) = Worker(b, WorkerConfig(worker_id="w")).claim_next(2)
    waiting = next(e for e in eids if e != t.execution_id)
    html = viewer_client.get(f"/executions/{waiting}/").content.decode()
    why = html[html.index('id="admission-why"'):][:600]
    assert f'href="/quotas/{qid}/"' in why and "concurrency cap of 1 reached" in why
    page = viewer_client.get(f"/quotas/{qid}/").content.decode()
    assert 'data-gauge="concurrency" data-state="hard"' in page
    assert f'href="{reverse("execution", args=[waiting])}"' in page
    assert 'data-waiting="1"' in page


def test_the_quotas_page_shows_window_usage_and_concurrency(viewer_client, dashboard_backend):
    b = dashboard_backend
    qid, _ = create_quota_policy(b, window_seconds=60, max_requests_per_window=5, max_concurrent=3)
    c = Client(b)
    for _ in range(2):
        c.create(kind="job", policy=Policy(quota_policy_id=qid))
    assert len(Worker(b, WorkerConfig(worker_id="w")).claim_next(2)) == 2
    html = viewer_client.get("/quotas/").content.decode()
    assert ">2 / 5<" in html and ">2 / 3<" in html
    assert 'data-gauge="rate" data-state="ok"' in html


def test_an_unattached_execution_has_no_admission_section(viewer_client, seed):
    html = viewer_client.get(f"/executions/{seed.waiting}/").content.decode()
    assert 'id="admission"' not in html
