"""Attempt durations and the diff between two attempts of one execution (#25 item 9)."""

from __future__ import annotations

import re

import pytest

from dashboard.selectors.attempts import side_by_side
from ffcore.execution.client import Client
from ffcore.worker.worker import Registry, Worker, WorkerConfig

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_attempts(dashboard_backend):
    """Attempt 0 fails after three frames; a replay's attempt 1 completes with one line changed and one added."""
    c = Client(dashboard_backend)
    eid = c.create(kind="job").execution_id
    w = Worker(dashboard_backend, WorkerConfig(worker_instance_id="w-diff-1", worker_id="alpha"), Registry())
    (t,) = w.claim_next(1)
    for line in ("start", "step <1>", "boom"):
        t.append_frame("log", line)
    t.fail("tool crashed", "tool")
    c.replay(eid)
    w2 = Worker(dashboard_backend, WorkerConfig(worker_instance_id="w-diff-2", worker_id="beta"), Registry())
    (t2,) = w2.claim_next(1)
    for line in ("start", "step <1>", "step 2", "done"):
        t2.append_frame("log", line)
    t2.complete()
    return eid


def test_the_diff_sets_facts_and_streams_side_by_side_with_changes_marked(viewer_client, two_attempts):
    # The attempts table shows durations and links the diff.
    html = viewer_client.get(f"/executions/{two_attempts}/").content.decode()
    table = re.search(r'<table class="grid" id="attempts">.*?</table>', html, re.S).group(0)
    assert len(re.findall(r"<td class=\"num\" data-duration>\d", table)) == 2
    assert "?a=0&amp;b=1" in table and "diff vs #0" in table
    r = viewer_client.get(f"/executions/{two_attempts}/attempts/diff?a=0&b=1")
    html = r.content.decode()
    assert r.status_code == 200
    facts = re.search(r'id="diff-facts".*?</table>', html, re.S).group(0)
    assert re.search(r'<tr class="changed" data-fact="worker"><th>worker</th>\s*<td>alpha</td><td>beta</td>', facts)
    assert re.search(r'<tr class="changed" data-fact="failure-reason">.*?tool crashed', facts, re.S)
    assert 'data-fact="duration"' in facts
    lines = re.findall(r'<tr class="d-(\w+)"><td class="mono">(.*?)</td><td class="mono">(.*?)</td></tr>', html)
    step = "[log] step &lt;1&gt;"
    assert lines[:2] == [("equal", "[log] start", "[log] start"), ("equal", step, step)]
    assert ("replace", "[log] boom", "[log] step 2") in lines and ("insert", "", "[log] done") in lines
    assert '<span id="diff-changed">2</span>' in html
    # Bad or missing attempt numbers are a 400 or a 404, never a 500.
    r = viewer_client.get(f"/executions/{two_attempts}/attempts/diff?a=x&b=1")
    assert r.status_code == 400 and 'data-error="a"' in r.content.decode()
    assert viewer_client.get(f"/executions/{two_attempts}/attempts/diff?a=0&b=7").status_code == 404
    assert viewer_client.get("/executions/nope/attempts/diff?a=0&b=1").status_code == 404


def test_side_by_side_pairs_replacements_and_keeps_order():
    rows = side_by_side(["a", "b", "c"], ["a", "x", "y", "c"])
    assert [(r.op, r.a, r.b) for r in rows] == [("equal", "a", "a"), ("replace", "b", "x"), ("insert", None, "y"),
                                               ("equal", "c", "c")]


def test_reasons_times_and_details_read_as_words():
    from dashboard.templatetags.ff import blocking, detail, ms, reason, state_label
    from ffcore.execution.explain import why

    assert reason("lease_lease_revoked") == "lease revoked"
    assert why({"lifecycle_phase": "terminal", "terminal_outcome": "failed",
                "failure_reason": "lease_lease_revoked"}).text == "Failed: lease_revoked"
    assert state_label("rate_limited", "waiting_for_budget") == "budget held"
    assert state_label("rate_limited", "waiting_for_quota") == "quota limited"
    assert blocking("waiting_for_budget") == "held by a budget"
    t = str(ms(1795711268312))
    assert t.startswith('<time class="ts" datetime="2026-11-26T') and 'title="1795711268312 ms · ' in t
    d = str(detail("delayed until 1795711268312", ""))
    assert "1795711268312 ms" in d and "delayed until <time" in d
    edge = "5aa50128-0000-4000-8000-000000000001"
    flow = "6ba7b810-9dad-41d1-80b4-00c04fd430c8"
    linked = str(detail(f"1 dep(s) unresolved incl {edge} <b>", flow))
    assert f'href="#edge-{edge}"' in linked and "&lt;b&gt;" in linked


def test_a_blocked_flow_members_unresolved_edge_links_to_its_upstream_row(viewer_client, dashboard_backend):
    from ffcore.flows.flows import Flows

    flows = Flows(dashboard_backend)
    fid = flows.create(kind="pair")
    up, down = flows.build(fid, [{"kind": "up"}, {"kind": "down"}], [(0, 1)])
    html = viewer_client.get(f"/executions/{down}/").content.decode()
    edge = re.search(r'incl <a class="mono" href="#edge-([0-9a-f-]{36})"', html).group(1)
    row = re.search(rf'<tr id="edge-{edge}">.*?</tr>', html, re.S).group(0)
    assert up in row
