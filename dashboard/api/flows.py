"""Flows: create, add members, cancel, stage and apply dependency edges (server.md §3.2 rows 15–19; §2.5).

Upstream's two-step edge protocol is kept as it is: stage the edge on the flow (optimistic on
`expected_graph_revision`), then apply it to the child. `ffcore.flows.flows.Flows.add_edge` does both in
one transaction for Python callers.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Query, Router, Schema, Status
from pydantic import Field, field_validator

from ffcore import functions as F
from ffcore.errors import InvalidInput
from ffcore.flows.flows import Flows
from ffcore.ids import ExecutionId, parse_edge_id, parse_flow_id

from .. import audit_trail
from ..backend import get_backend
from .audited import audited
from .schemas import REASON, Error

router = Router(tags=["flows"])

U53 = 2**53 - 1
NOW = Field(default=None, ge=0, le=U53, description="Ignored by the flow functions (they use the server clock)")
KIND = Field(default=F.SUCCESS_ONLY, min_length=1, max_length=64)


def _eid(v: str) -> str:
    ExecutionId(v)
    return v


class CreateFlowIn(Schema):
    flow_id: str | None = Field(default=None, description="UUID; minted when omitted")
    reason: str | None = REASON
    flow_kind: str = Field(default="dag", min_length=1, max_length=256)
    namespace: str = Field(default="default", min_length=1, max_length=256)
    now: int | None = NOW

    @field_validator("flow_id")
    @classmethod
    def _id(cls, v: str | None) -> str | None:
        return None if v is None else parse_flow_id(v)


class MemberIn(Schema):
    flow_id: str | None = None
    reason: str | None = REASON
    execution_id: str = Field(description="Must be minted on the flow's partition (`{fp:N}` of the flow)")
    now: int | None = NOW

    @field_validator("execution_id")
    @classmethod
    def _ids(cls, v: str) -> str:
        return _eid(v)


class CancelFlowIn(Schema):
    flow_id: str | None = None
    reason: str = Field(min_length=1, max_length=1000)
    cancellation_policy: str = Field(default="cancel_all", min_length=1, max_length=64,
                                     description="Only `cancel_all` cancels the members")
    now: int | None = NOW


class CancelQuery(Schema):
    wait: str | None = Field(default=None, max_length=16, description="`true` or `1`: cancel members inline")
    timeout_ms: int | None = Field(default=None, ge=0, le=3_600_000,
                                   description="With wait: stop waiting after this long (the rest is cancelled in "
                                               "the background: CancellationScheduled)")


class _EdgeRefs(Schema):
    """What the stage and apply bodies share: an edge's id, its two ends (validated alike), kind, data ref."""

    flow_id: str | None = None
    reason: str | None = REASON
    edge_id: str
    upstream_execution_id: str
    downstream_execution_id: str
    dependency_kind: str = KIND
    data_passing_ref: str | None = Field(default=None, max_length=1024)
    now: int | None = Field(default=None, ge=0, le=U53)

    @field_validator("edge_id")
    @classmethod
    def _edge(cls, v: str) -> str:
        return parse_edge_id(v)

    @field_validator("upstream_execution_id", "downstream_execution_id")
    @classmethod
    def _ids(cls, v: str) -> str:
        return _eid(v)


class StageEdgeIn(_EdgeRefs):
    expected_graph_revision: int = Field(ge=0, le=U53)


class ApplyEdgeIn(_EdgeRefs):
    graph_revision: int = Field(ge=0, le=U53)



def _flow(flow_id: str, body_id: str | None) -> str:
    fid = parse_flow_id(flow_id)
    if body_id is not None and body_id != fid:
        raise InvalidInput("invalid_input", ["path flow_id does not match body flow_id"])
    return fid


@router.post("/flows", response={201: dict[str, Any], 200: dict[str, Any], 400: Error, 422: Error})
def create_flow(request: HttpRequest, body: CreateFlowIn) -> Status:
    """201 `{"Created": {flow_id}}`, or 200 `{"AlreadySatisfied": {flow_id}}` for an existing id."""
    flows = Flows(get_backend())
    existed = body.flow_id is not None and bool(flows.backend.client.exists(flows.keys(body.flow_id).core))
    with audited(request, "create_flow", body.flow_id or "", body.reason, detail=f"kind={body.flow_kind}") as a:
        fid = flows.create(kind=body.flow_kind, namespace=body.namespace, flow_id=body.flow_id)
        a.target = fid
    out = {"flow_id": fid}
    return Status(200, {"AlreadySatisfied": out}) if existed else Status(201, {"Created": out})


@router.post("/flows/{flow_id}/members", response={201: dict[str, Any], 200: dict[str, Any], 400: Error, 422: Error})
def add_member(request: HttpRequest, flow_id: str, body: MemberIn) -> Status:
    """201 `{"Added": {execution_id, new_node_count}}` or 200 `{"AlreadyMember": {execution_id, node_count}}`.
    An execution minted on another partition is a 400 `partition_mismatch`."""
    fid = _flow(flow_id, body.flow_id)
    flows = Flows(get_backend())
    e = flows.check_partition(fid, body.execution_id)
    with audited(request, "add_flow_member", fid, body.reason, detail=f"execution={e}"):
        added, count = flows.attach(fid, e)
    if not added:
        return Status(200, {"AlreadyMember": {"execution_id": e, "node_count": count}})
    return Status(201, {"Added": {"execution_id": e, "new_node_count": count}})


@router.post("/flows/{flow_id}/cancel", response={200: dict[str, Any], 400: Error, 422: Error})
def cancel_flow(request: HttpRequest, flow_id: str, body: CancelFlowIn, q: Query[CancelQuery]) -> dict[str, Any]:
    """`{"Cancelled": …}` (wait mode, nothing to dispatch, or already cancelled),
    `{"CancellationScheduled": …}` (members are being cancelled in the background; poll their state) or, in
    wait mode when some members could not be cancelled, `{"PartiallyCancelled": {…, failed_member_execution_ids}}`
    (they stay pending: retry, or the cancel reconciler finishes them)."""
    fid = _flow(flow_id, body.flow_id)
    with audited(request, "cancel_flow", fid, body.reason) as a:
        out = Flows(get_backend()).cancel(fid, reason=body.reason, policy=body.cancellation_policy,
                                          wait=q.wait in ("true", "1"), timeout_ms=q.timeout_ms)
        failed = out.failed
        a.detail = audit_trail.flow_cancel_detail(out.status, len(out.members))
    if out.status == "partially_cancelled":
        return {"PartiallyCancelled": {"cancellation_policy": out.policy, "member_execution_ids": out.members,
                                       "failed_member_execution_ids": failed}}
    if out.status == "scheduled":
        return {"CancellationScheduled": {"cancellation_policy": out.policy, "member_count": len(out.members),
                                          "member_execution_ids": out.members}}
    return {"Cancelled": {"cancellation_policy": out.policy, "member_execution_ids": out.members}}


@router.post("/flows/{flow_id}/edges", response={201: dict[str, Any], 400: Error, 422: Error})
def stage_edge(request: HttpRequest, flow_id: str, body: StageEdgeIn) -> Status:
    """Stage an edge between two members: 201 `{"Staged": {edge_id, new_graph_revision}}`. A revision other
    than the flow's current one is a 400 `stale_graph_revision` (re-read and retry)."""
    fid = _flow(flow_id, body.flow_id)
    with audited(request, "stage_edge", fid, body.reason, detail=f"edge={body.edge_id}"):
        revision = Flows(get_backend()).stage_edge(
            fid, edge_id=body.edge_id, upstream=body.upstream_execution_id, downstream=body.downstream_execution_id,
            expected_revision=body.expected_graph_revision, kind=body.dependency_kind,
            data_passing_ref=body.data_passing_ref or "", now_ms=body.now)
    return Status(201, {"Staged": {"edge_id": body.edge_id, "new_graph_revision": revision}})


@router.post("/flows/{flow_id}/edges/apply", response={200: Any, 400: Error, 422: Error})
def apply_edge(request: HttpRequest, flow_id: str, body: ApplyEdgeIn) -> Any:
    """Apply a staged edge to its child: `{"Applied": {unsatisfied_count}}` or `"AlreadyApplied"`."""
    fid = _flow(flow_id, body.flow_id)
    with audited(request, "apply_edge", fid, body.reason, detail=f"edge={body.edge_id}"):
        unsatisfied = Flows(get_backend()).apply_edge(
            fid, edge_id=body.edge_id, upstream=body.upstream_execution_id, downstream=body.downstream_execution_id,
            graph_revision=body.graph_revision, kind=body.dependency_kind,
            data_passing_ref=body.data_passing_ref or "", now_ms=body.now)
    if unsatisfied is None:
        return "AlreadyApplied"
    return {"Applied": {"unsatisfied_count": unsatisfied}}
