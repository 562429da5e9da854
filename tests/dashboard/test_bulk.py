"""Bulk cancel / replay from the filtered list: exact count and sample, confirm, progress, per-item results."""

import re
import time
from urllib.parse import unquote

import pytest

from ffcore import audit
from ffcore.execution import bulk
from ffcore.execution.client import Client

pytestmark = pytest.mark.django_db


def _make(backend, n, kind="batch"):
    return [r.execution_id for r in Client(backend).create_many([{"kind": kind} for _ in range(n)])]


def _wait_job(backend, job):
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        st = bulk.status(backend, job)
        if st and st.finished:
            return st
        time.sleep(0.05)
    raise AssertionError("bulk job did not finish")


def test_preview_gives_the_exact_count_and_a_sample(operator_client, dashboard_backend):
    eids = _make(dashboard_backend, 23)
    _make(dashboard_backend, 5, kind="other")
    r = operator_client.post("/executions/bulk/preview?kind=batch", {"action": "cancel", "reason": "cleanup"},
                             HTTP_HX_REQUEST="true")
    html = r.content.decode()
    assert r.status_code == 200
    assert 'data-count="23"' in html
    assert len(re.findall(r'<li class="mono">', html)) == 10
    assert all(unquote(e) in eids for e in re.findall(r"<li class=\"mono\"><a href=\"/executions/([^/]+)/", html))
    assert Client(dashboard_backend).get_state(eids[0]) == "waiting"  # a preview changes nothing


def test_confirm_runs_the_action_with_per_item_results_and_audit(operator_client, dashboard_backend):
    eids = _make(dashboard_backend, 150)
    r = operator_client.post("/executions/bulk/run?kind=batch",
                             {"action": "cancel", "reason": "cleanup", "confirm_count": "150"}, HTTP_HX_REQUEST="true")
    assert r.status_code == 200
    job = re.search(r"/executions/bulk/([0-9a-f-]{36})/", r.content.decode()).group(1)
    st = _wait_job(dashboard_backend, job)
    assert (st.total, st.done, st.fields["ok"], st.fields["failed"]) == (150, 150, "150", "0")
    c = Client(dashboard_backend)
    assert {c.get_state(e) for e in eids} == {"cancelled"}
    assert {r["id"] for r in st.results} == set(eids)
    page = operator_client.get(f"/executions/bulk/{job}/").content.decode()
    assert "bulk-finished" in page and page.count('class="ok">ok<') == 150
    entries = audit.recent(dashboard_backend, count=200)
    assert len([e for e in entries if e.action == "bulk_cancel" and e.reason == "cleanup"]) == 150


def test_a_changed_set_asks_again(operator_client, dashboard_backend):
    _make(dashboard_backend, 4)
    r = operator_client.post("/executions/bulk/run?kind=batch",
                             {"action": "cancel", "reason": "x", "confirm_count": "3"}, HTTP_HX_REQUEST="true")
    assert r.status_code == 409
    html = r.content.decode()
    assert "The set changed since the preview." in html and 'data-count="4"' in html


def test_bulk_replay_reports_refusals_per_item(operator_client, dashboard_backend, seed):
    # In the seed: one completed and one failed "report" (replayable) and one waiting "report" (refused).
    r = operator_client.post("/executions/bulk/run?kind=report",
                             {"action": "replay", "reason": "rerun", "confirm_count": "3"}, HTTP_HX_REQUEST="true")
    job = re.search(r"/executions/bulk/([0-9a-f-]{36})/", r.content.decode()).group(1)
    st = _wait_job(dashboard_backend, job)
    by_id = {x["id"]: x["code"] for x in st.results}
    assert by_id == {seed.completed: "ok", seed.failed: "ok", seed.waiting: "execution_not_terminal"}


def test_viewers_cannot_run_bulk_actions(viewer_client, dashboard_backend):
    eids = _make(dashboard_backend, 2)
    r = viewer_client.post("/executions/bulk/run?kind=batch", {"action": "cancel", "reason": "x", "confirm_count": "2"})
    assert r.status_code == 403
    assert Client(dashboard_backend).get_state(eids[0]) == "waiting"


def test_bulk_needs_a_reason(operator_client, dashboard_backend):
    _make(dashboard_backend, 2)
    r = operator_client.post("/executions/bulk/preview?kind=batch", {"action": "cancel", "reason": ""},
                             HTTP_HX_REQUEST="true")
    assert r.status_code == 400
    assert 'data-error="reason"' in r.content.decode()


def test_unknown_job_is_404(viewer_client, dashboard_backend):
    assert viewer_client.get("/executions/bulk/6ba7b810-9dad-11d1-80b4-00c04fd430c8/").status_code == 404
