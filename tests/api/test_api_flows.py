"""REST API: flows — create, members, edges (stage + apply), cancel (server.md §3.2 rows 15–19)."""

from __future__ import annotations

import time

import pytest

from ffcore import keys
from ffcore.execution.client import Client
from ffcore.flows.flows import Flows
from ffcore.ids import ExecutionId, new_uuid
from ffcore.keys import ExecKeys
from tests.api.helpers import post
from tests.ffcore.suspension_support import core
from tests.keyspace import MISSING_UUID, keyspace

pytestmark = pytest.mark.django_db


def _flow_with_members(client, backend, n=2):
    fid = post(client, "/v1/flows", {"flow_kind": "etl", "namespace": "ns"}).json()["Created"]["flow_id"]
    part = Flows(backend).partition(fid)
    eids = [Client(backend).create(kind="step", execution_id=ExecutionId.mint(part)).execution_id for _ in range(n)]
    for e in eids:
        assert post(client, f"/v1/flows/{fid}/members", {"execution_id": e}).status_code == 201
    return fid, eids


def test_create_flow_is_201_then_200_for_the_same_id(client, dashboard_backend):
    fid = new_uuid()
    r = post(client, "/v1/flows", {"flow_id": fid, "flow_kind": "etl", "namespace": "ns", "now": 0})
    assert r.status_code == 201 and r.json() == {"Created": {"flow_id": fid}}
    again = post(client, "/v1/flows", {"flow_id": fid, "flow_kind": "etl", "namespace": "ns"})
    assert again.status_code == 200 and again.json() == {"AlreadySatisfied": {"flow_id": fid}}


def test_members_are_added_once_and_must_share_the_flow_partition(client, dashboard_backend):
    fid, (a, _b) = _flow_with_members(client, dashboard_backend)
    again = post(client, f"/v1/flows/{fid}/members", {"execution_id": a, "flow_id": fid})
    assert again.status_code == 200 and again.json() == {"AlreadyMember": {"execution_id": a, "node_count": 2}}
    part = Flows(dashboard_backend).partition(fid)
    other = Client(dashboard_backend).create(kind="x", execution_id=ExecutionId.mint((part + 1) % 256)).execution_id
    before = keyspace(dashboard_backend)
    r = post(client, f"/v1/flows/{fid}/members", {"execution_id": other})
    assert r.status_code == 400 and r.json()["kind"] == "partition_mismatch"
    assert keyspace(dashboard_backend) == before
    unknown = post(client, f"/v1/flows/{MISSING_UUID}/members", {"execution_id": ExecutionId.mint(
        Flows(dashboard_backend).partition(MISSING_UUID))})
    assert unknown.status_code == 400 and unknown.json()["kind"] == "flow_not_found"


def test_an_edge_is_staged_then_applied_and_blocks_the_child(client, dashboard_backend):
    fid, (a, b) = _flow_with_members(client, dashboard_backend)
    edge = new_uuid()
    stage = {"edge_id": edge, "upstream_execution_id": a, "downstream_execution_id": b,
             "expected_graph_revision": 2, "now": int(time.time() * 1000)}
    r = post(client, f"/v1/flows/{fid}/edges", stage)
    assert r.status_code == 201 and r.json() == {"Staged": {"edge_id": edge, "new_graph_revision": 3}}
    stale = post(client, f"/v1/flows/{fid}/edges", {**stage, "edge_id": new_uuid()})
    assert stale.status_code == 400 and stale.json()["kind"] == "stale_graph_revision"
    cycle = post(client, f"/v1/flows/{fid}/edges", {**stage, "edge_id": new_uuid(), "upstream_execution_id": b,
                                                    "downstream_execution_id": a, "expected_graph_revision": 3})
    assert cycle.status_code == 400 and cycle.json()["kind"] == "cycle_detected"
    apply = {"edge_id": edge, "upstream_execution_id": a, "downstream_execution_id": b, "graph_revision": 3}
    r = post(client, f"/v1/flows/{fid}/edges/apply", apply)
    assert r.status_code == 200 and r.json() == {"Applied": {"unsatisfied_count": 1}}
    assert core(dashboard_backend, b)["public_state"] == "waiting_children"
    assert post(client, f"/v1/flows/{fid}/edges/apply", apply).json() == "AlreadyApplied"


def test_cancel_flow_in_wait_mode_cancels_every_member(client, dashboard_backend):
    fid, eids = _flow_with_members(client, dashboard_backend)
    r = post(client, f"/v1/flows/{fid}/cancel?wait=true", {"reason": "stop", "cancellation_policy": "cancel_all"})
    assert r.status_code == 200
    out = r.json()["Cancelled"]
    assert out["cancellation_policy"] == "cancel_all" and sorted(out["member_execution_ids"]) == sorted(eids)
    assert {core(dashboard_backend, e)["public_state"] for e in eids} == {"cancelled"}
    again = post(client, f"/v1/flows/{fid}/cancel", {"reason": "again"})
    assert again.status_code == 200 and sorted(again.json()["Cancelled"]["member_execution_ids"]) == sorted(eids)


def test_cancel_flow_async_schedules_the_members(client, dashboard_backend):
    fid, eids = _flow_with_members(client, dashboard_backend, n=3)
    r = post(client, f"/v1/flows/{fid}/cancel", {"reason": "stop"})
    out = r.json()["CancellationScheduled"]
    assert out["member_count"] == 3 and sorted(out["member_execution_ids"]) == sorted(eids)
    deadline = time.monotonic() + 5
    while {core(dashboard_backend, e)["public_state"] for e in eids} != {"cancelled"}:
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_a_cancel_wait_that_runs_out_of_time_is_scheduled_and_a_bad_timeout_is_refused(client, dashboard_backend):
    fid, eids = _flow_with_members(client, dashboard_backend, n=3)
    bad = post(client, f"/v1/flows/{fid}/cancel?wait=true&timeout_ms=-1", {"reason": "stop"})
    assert bad.status_code == 422 and "timeout_ms" in bad.json()["error"]
    assert core(dashboard_backend, eids[0])["public_state"] == "waiting"  # refused before anything was written
    r = post(client, f"/v1/flows/{fid}/cancel?wait=true&timeout_ms=0", {"reason": "stop"})
    assert r.status_code == 200 and r.json()["CancellationScheduled"]["member_count"] == 3
    deadline = time.monotonic() + 5
    while {core(dashboard_backend, e)["public_state"] for e in eids} != {"cancelled"}:
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_flow_routes_reject_bad_ids_and_bodies(client, dashboard_backend):
    assert post(client, "/v1/flows/not-a-flow/cancel", {"reason": "x"}).status_code == 400
    r = post(client, f"/v1/flows/{MISSING_UUID}/cancel", {"reason": "x"})
    assert r.status_code == 400 and r.json()["kind"] == "flow_not_found"
    r = post(client, "/v1/flows", {"flow_id": "NOT-UUID"})
    assert r.status_code == 422 and "flow_id" in r.json()["error"]
    r = post(client, f"/v1/flows/{MISSING_UUID}/edges", {"edge_id": new_uuid(), "upstream_execution_id": "x",
                                                         "downstream_execution_id": "y", "expected_graph_revision": 0})
    assert r.status_code == 422 and "upstream_execution_id" in r.json()["error"]
    r = post(client, f"/v1/flows/{MISSING_UUID}/edges/apply", {"edge_id": "e", "upstream_execution_id": "x",
                                                               "downstream_execution_id": "y", "graph_revision": -1})
    assert r.status_code == 422 and "graph_revision" in r.json()["error"] and "edge_id" in r.json()["error"]
    r = post(client, f"/v1/flows/{MISSING_UUID}/cancel", {"reason": "x", "flow_id": new_uuid()})
    assert r.status_code == 400 and "does not match" in r.json()["error"]


def test_a_wait_mode_cancel_with_a_member_that_cannot_be_cancelled_is_partially_cancelled(client, dashboard_backend):
    """Upstream's PartiallyCancelled: the failed members are named (and stay pending for the reconciler)."""
    fid, (good,) = _flow_with_members(client, dashboard_backend, n=1)
    part = Flows(dashboard_backend).partition(fid)
    broken = Client(dashboard_backend).create(kind="step", lane="odd", execution_id=ExecutionId.mint(part)).execution_id
    assert post(client, f"/v1/flows/{fid}/members", {"execution_id": broken}).status_code == 201
    terminal = ExecKeys(broken).lane("odd").terminal
    dashboard_backend.client.delete(terminal)
    dashboard_backend.client.set(terminal, "not a sorted set")  # its cancel raises inside the library
    r = post(client, f"/v1/flows/{fid}/cancel?wait=true", {"reason": "stop"})
    assert r.status_code == 200, r.content
    out = r.json()["PartiallyCancelled"]
    assert out["failed_member_execution_ids"] == [broken]
    assert sorted(out["member_execution_ids"]) == sorted([good, broken])
    assert Client(dashboard_backend).get_state(good).value == "cancelled"
    assert dashboard_backend.client.sismember(keys.flow_pending_cancels(Flows(dashboard_backend).partition(fid), fid),
                                              broken)
