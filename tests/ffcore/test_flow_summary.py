"""The flow summary hash F:summary under upstream's field names, and ff_read_summary (the attempt stream's
rolling summary, upstream v0.13's shape)."""

from __future__ import annotations

import pytest

from ffcore import functions as F
from ffcore.backend import Backend
from ffcore.engine.flow_scanners import FlowProjector
from ffcore.execution.client import Client
from ffcore.flows import reads as flow_reads
from ffcore.flows.flows import Flows
from ffcore.ids import ExecutionId
from ffcore.keys import ExecKeys
from ffcore.reads import decode_map


def _projected(backend: Backend) -> tuple[str, dict[str, str]]:
    flows = Flows(backend)
    fid = flows.create(kind="summary")
    flows.build(fid, [{"kind": "x"} for _ in range(3)], edges=[(0, 1)])
    FlowProjector(backend).tick()
    return fid, decode_map(backend.client.hgetall(flow_reads.flow_keys(backend, fid).summary))


def test_the_projector_writes_upstreams_member_count_fields(backend: Backend):
    _fid, summary = _projected(backend)
    assert summary["members_waiting"] == "2" and summary["members_waiting_children"] == "1"
    assert summary["members_completed"] == "0" and summary["total_members"] == "3"
    assert summary["sampled_members"] == "3" and int(summary["last_summary_update_at"]) > 0
    assert summary["public_flow_state"]
    assert not {"total", "projected_at", "completed", "waiting"} & set(summary)


def test_a_big_flow_is_listed_with_the_counts_of_its_summary(backend: Backend, monkeypatch: pytest.MonkeyPatch):
    fid, _summary = _projected(backend)
    monkeypatch.setattr(flow_reads, "LIVE_COUNT_LIMIT", 1)
    (row,) = [r for r in flow_reads.list_flows(backend, limit=50).rows if r.flow_id == fid]
    assert row.counts == {"waiting": 2, "waiting_children": 1}


def test_read_summary_answers_upstreams_zero_values_when_no_summary_exists(backend: Backend):
    eid = Client(backend).create(kind="job").execution_id
    reply = backend.call(F.read_summary(ExecKeys(ExecutionId(eid)), 0))
    assert reply.status == "OK" and reply.fields == ["", "0", "", "0", "0"]


def test_read_summary_returns_a_stored_document_with_its_version_and_times(backend: Backend):
    eid = Client(backend).create(kind="job").execution_id
    k = ExecKeys(ExecutionId(eid))
    backend.client.hset(k.stream_summary(0), mapping={
        "document": '{"tokens":12}', "version": 3, "patch_kind": "json-merge-patch", "last_updated_ms": 200,
        "first_applied_ms": 100})
    reply = backend.call(F.read_summary(k, 0))
    assert reply.fields == ['{"tokens":12}', "3", "json-merge-patch", "200", "100"]
    assert k.stream_summary(0) == f"ff:stream:{k.tag}:{eid}:0:summary"
