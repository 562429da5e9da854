"""GET /v1/executions/{id}/history and the attempts with their tracebacks, against a real Valkey."""

from __future__ import annotations

import pytest

from ffcore.execution import history
from ffcore.execution.client import Client
from ffcore.worker.worker import Registry, Worker, WorkerConfig

pytestmark = pytest.mark.django_db


def _check_amount(row):
    return float(row["amount"])


@pytest.fixture
def failed(dashboard_backend):
    """An execution whose handler raised ValueError (no retry policy: it ends failed)."""
    eid = Client(dashboard_backend).create(kind="charge").execution_id
    reg = Registry()

    @reg.handler("charge")
    def charge(task):
        task.update_progress(20, "parsing")
        return _check_amount({"amount": "twelve"})

    w = Worker(dashboard_backend, WorkerConfig(worker_instance_id="w-api-hist", worker_id="api"), reg)
    (t,) = w.claim_next(1)
    w.execute(t)
    return str(eid)


def test_history_returns_the_same_entries_as_the_read_model(client, dashboard_backend, failed):
    r = client.get(f"/v1/executions/{failed}/history")
    assert r.status_code == 200
    body = r.json()
    kinds = [e["kind"] for e in body["entries"]]
    assert kinds[0] == "created" and kinds[-1] == "failed" and "claimed" in kinds and "progress" in kinds
    assert body["entries"] == [e.as_dict() for e in history.read(dashboard_backend, failed)]
    assert body["total"] == len(kinds) and body["next_cursor"] == ""
    claimed = next(e for e in body["entries"] if e["kind"] == "claimed")
    assert claimed["actor"] == "w-api-hist" and claimed["attempt"] == 0


def test_history_pages_with_a_cursor(client, failed):
    first = client.get(f"/v1/executions/{failed}/history?limit=2").json()
    assert len(first["entries"]) == 2 and first["next_cursor"] == "2"
    rest = client.get(f"/v1/executions/{failed}/history?limit=100&cursor={first['next_cursor']}").json()
    assert first["entries"] + rest["entries"] == client.get(f"/v1/executions/{failed}/history").json()["entries"]


def test_history_refuses_bad_input_naming_the_field(client, failed):
    r = client.get(f"/v1/executions/{failed}/history?limit=0")
    assert r.status_code == 422 and "limit" in r.content.decode()
    r = client.get(f"/v1/executions/{failed}/history?cursor=abc")
    assert r.status_code == 422 and "cursor" in r.content.decode()
    assert client.get("/v1/executions/not-an-id/history").status_code == 400
    missing = "{fp:1}:00000000-0000-4000-8000-000000000000"
    assert client.get(f"/v1/executions/{missing}/history").status_code == 404


def test_the_attempt_api_carries_the_traceback(client, failed):
    r = client.get(f"/v1/executions/{failed}/attempts/0")
    assert r.status_code == 200
    a = r.json()
    assert a["fields"]["attempt_state"] == "ended_failure"
    assert a["traceback"].startswith("Traceback (most recent call last)")
    assert "_check_amount" in a["traceback"] and "ValueError: could not convert string to float" in a["traceback"]
    assert client.get(f"/v1/executions/{failed}/attempts").json() == [a]
    assert client.get(f"/v1/executions/{failed}/attempts/7").status_code == 404


def test_the_routes_are_in_the_openapi_schema(client):
    paths = client.get("/api/openapi.json").json()["paths"]
    assert "/v1/executions/{execution_id}/history" in paths
    assert "/v1/executions/{execution_id}/attempts/{attempt_index}" in paths


def test_the_execution_page_shows_history_and_the_collapsed_traceback(viewer_client, failed):
    html = viewer_client.get(f"/executions/{failed}/").content.decode()
    assert '<section id="history">' in html and "<h2>History" in html
    assert 'data-kind="failed"' in html and 'data-kind="progress"' in html
    collapsed = '<details class="traceback"><summary>Traceback</summary><pre class="mono">'
    assert collapsed + "Traceback (most recent call last)" in html


def test_the_attempt_diff_shows_both_tracebacks(viewer_client, dashboard_backend, failed):
    Client(dashboard_backend).replay(failed)
    w = Worker(dashboard_backend, WorkerConfig(worker_instance_id="w-api-hist-2", worker_id="api"), Registry())
    (t,) = w.claim_next(1)
    t.complete()
    html = viewer_client.get(f"/executions/{failed}/attempts/diff?a=0&b=1").content.decode()
    assert 'data-fact="traceback"' in html and html.count('<details class="traceback">') == 1


def test_the_history_page_continues_from_a_cursor(viewer_client, dashboard_backend, failed):
    whole = history.read(dashboard_backend, failed)
    html = viewer_client.get(f"/executions/{failed}/history?cursor=2").content.decode()
    assert html.count("<tr data-kind=") == len(whole) - 2
    assert 'data-kind="created"' not in html and 'data-kind="failed"' in html
    assert viewer_client.get("/executions/{fp:1}:00000000-0000-4000-8000-000000000000/history").status_code == 404


def test_the_flow_page_shows_the_flow_history(viewer_client, dashboard_backend):
    from ffcore.flows.flows import Flows

    flows = Flows(dashboard_backend)
    fid = flows.create()
    flows.build(fid, [{"kind": "a"}, {"kind": "b"}], edges=[(0, 1)])
    html = viewer_client.get(f"/flows/{fid}/").content.decode()
    assert '<section id="history">' in html and 'data-kind="edge"' in html and html.count('data-kind="member"') == 2
    later = viewer_client.get(f"/flows/{fid}/history?cursor=1").content.decode()
    assert 'data-kind="created"' not in later and 'data-kind="edge"' in later
