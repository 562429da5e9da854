"""Bulk cancel and bulk replay from the executions list on an upstream v0.15.0 deployment (issue #40 items 3, 5):
the selection is read through the reconciled `ff:up:` index with the list's filters, and every execution is acted
on through upstream's own functions — upstream's records say so, the rest of the scenario is untouched, every
execution gets its audit row, and the library stays byte-for-byte as it was."""

from __future__ import annotations

import json
import re
import time

import pytest
from django.urls import reverse

from ffcore import audit
from ffcore.execution import bulk
from ffcore.ids import ExecutionId
from ffcore.keys import ExecKeys
from ffcore.upstream.reconcile import reconcile_once
from tests import upstream_scenario

pytestmark = pytest.mark.django_db


def _finished(backend, job: str) -> bulk.JobStatus:
    deadline = time.monotonic() + 20
    while True:
        st = bulk.status(backend, job)
        assert st is not None
        if st.fields.get("state") != "running":
            return st
        assert time.monotonic() < deadline, st.fields
        time.sleep(0.05)


def _bulk(client, backend, action: str, query: str, reason: str, expect: int) -> bulk.JobStatus:
    preview = client.post(f"{reverse('bulk_preview')}?{query}", {"action": action, "reason": reason},
                          HTTP_HX_REQUEST="true")
    assert preview.status_code == 200, preview.content.decode()[:500]
    assert f'data-count="{expect}"' in preview.content.decode()
    run = client.post(f"{reverse('bulk_run')}?{query}", {"action": action, "reason": reason,
                                                        "confirm_count": expect}, HTTP_HX_REQUEST="true")
    assert run.status_code == 200, run.content.decode()[:500]
    job = re.search(r"/executions/bulk/([0-9a-f-]{36})/", run.content.decode())
    assert job, run.content.decode()[:500]
    return _finished(backend, job.group(1))


def _core(raw, eid: str) -> dict[str, str]:
    return {a.decode(): b.decode() for a, b in raw.hgetall(ExecKeys(eid).core).items()}


def test_bulk_cancel_then_bulk_replay_select_through_our_index_and_act_through_upstream(
        operator_client, made, up_backend, raw):
    digest, dump = upstream_scenario.code_digest(raw), raw.function_dump()
    sweep = [upstream_scenario.create(raw, ExecutionId.mint(n), kind="sweep") for n in (1, 4, 7, 7, 9)]
    reconcile_once(up_backend)
    others = {e: _core(raw, e) for e in made.executions()}

    st = _bulk(operator_client, up_backend, "cancel", "kind=sweep", "sweep the test batch", len(sweep))
    assert (st.fields["state"], st.done, int(st.fields["ok"])) == ("finished", len(sweep), len(sweep))
    cores = [_core(raw, e) for e in sweep]
    assert {(c["lifecycle_phase"], c["terminal_outcome"]) for c in cores} == {("terminal", "cancelled")}

    # The cancelled ones, chosen by state this time (upstream's own lane state index), are replayed.
    st = _bulk(operator_client, up_backend, "replay", "kind=sweep&state=cancelled", "replay the batch", len(sweep))
    assert int(st.fields["ok"]) == len(sweep), st.results
    cores = [_core(raw, e) for e in sweep]
    assert {(c["public_state"], c["replay_count"]) for c in cores} == {("waiting", "1")}

    assert {e: _core(raw, e) for e in made.executions()} == others  # the filter held: nothing else was touched
    rows = [r for r in audit.recent(up_backend, count=50) if r.action in ("bulk_cancel", "bulk_replay")]
    assert sorted((r.action, r.target) for r in rows) == sorted(
        [("bulk_cancel", e) for e in sweep] + [("bulk_replay", e) for e in sweep])
    assert upstream_scenario.code_digest(raw) == digest and raw.function_dump() == dump



def test_the_rest_bulk_route_signals_upstream_waitpoints_chosen_by_the_inbox_filter(monkeypatch, reconciled,
                                                                                   up_backend, raw):
    """The only REST bulk route (bulk signal): the inbox filter finds the composite waitpoint upstream's suspend
    wrote, and the signal goes in with upstream's 15 KEYS — one leaf of its AllOf is satisfied, nothing resumes."""
    from django.test import Client as DjangoClient

    monkeypatch.setenv("FF_API_TOKEN", "t")
    api = DjangoClient(HTTP_AUTHORIZATION="Bearer t")
    dump = raw.function_dump()
    r = api.post("/v1/waitpoints/bulk-signal", json.dumps({
        "signal_name": "approve", "filter": {"signal": "approve"}, "expect_count": 1, "reason": "standup said yes"}),
        content_type="application/json")
    assert r.status_code == 202, r.content
    st = _finished(up_backend, r.json()["job_id"])
    assert [x["id"] for x in st.results] == [reconciled.suspended] and int(st.fields["ok"]) == 1, st.results
    assert raw.scard(ExecKeys(reconciled.suspended).suspension_satisfied_set) == 1
    assert _core(raw, reconciled.suspended)["public_state"] == "suspended"  # "legal" is still awaited
    assert raw.xlen(ExecKeys(reconciled.suspended).idx.signal_delivery) == 1
    assert raw.function_dump() == dump
