"""Typed reads (operations §12.2, §12.9, §12.11, §12.12): an execution's snapshot with its lease and current
waitpoint, a flow's snapshot with its edge groups, one edge, and a member's edges by direction; and the
edge-group policy of a member (§8.7, all_of only). Our routes: upstream's v0.2.0 server has none of them
(its SDK reads Valkey directly). The responses are ffcore's own read dataclasses, served as they are: ninja
documents and serializes a dataclass like a Schema, so the wire shape has one definition."""

from __future__ import annotations

from typing import Any, Literal

from django.http import HttpRequest
from ninja import Query, Router, Schema
from pydantic import Field

from ffcore.flows import edge_groups
from ffcore.flows import reads as flow_reads
from ffcore.flows.reads import EdgeGroupSnapshot, EdgeSnapshot, FlowSnapshot
from ffcore.ids import ExecutionId
from ffcore.reads import ExecutionSnapshot, describe_execution

from ..backend import get_backend
from .audited import audited
from .errors import NotFound
from .schemas import REASON, Error

router = Router(tags=["reads"])


class EdgeGroupPolicyIn(Schema):
    policy: dict[str, Any] = Field(description='EdgeDependencyPolicy: `{"kind": "all_of"}`, `{"kind": "any_of", '
                                               '"on_satisfied": "cancel_remaining" | "let_run"}` or `{"kind": '
                                               '"quorum", "k": 2, "on_satisfied": ...}`; set before the first edge '
                                               "into the member")
    reason: str | None = REASON
    now: int | None = Field(default=None, ge=0, le=2**53 - 1, description="Ignored")


class EdgesQuery(Schema):
    direction: Literal["outgoing", "incoming"] = Field(description="Edges leaving or entering the member")


@router.get("/executions/{execution_id}/snapshot", response={200: ExecutionSnapshot, 400: Error, 404: Error})
def execution_snapshot(request: HttpRequest, execution_id: str) -> ExecutionSnapshot:
    """describe_execution: state, current attempt, the lease a worker holds now, the current waitpoint, tags."""
    snap = describe_execution(get_backend(), ExecutionId(execution_id))
    if snap is None:
        raise NotFound(f"execution not found: {execution_id}")
    return snap


@router.get("/flows/{flow_id}", response={200: FlowSnapshot, 400: Error, 404: Error})
def flow_snapshot(request: HttpRequest, flow_id: str) -> FlowSnapshot:
    """describe_flow: the flow's core, tags and every downstream member's inbound edge group."""
    snap = flow_reads.describe_flow(get_backend(), flow_id)
    if snap is None:
        raise NotFound(f"flow not found: {flow_id}")
    return snap


@router.get("/flows/{flow_id}/edge-groups", response={200: list[EdgeGroupSnapshot], 400: Error, 404: Error})
def flow_edge_groups(request: HttpRequest, flow_id: str) -> list[EdgeGroupSnapshot]:
    """The edge groups alone (as in the flow snapshot), by downstream execution id."""
    snap = flow_reads.describe_flow(get_backend(), flow_id)
    if snap is None:
        raise NotFound(f"flow not found: {flow_id}")
    return snap.edge_groups


@router.get("/flows/{flow_id}/members/{execution_id}/edges",
            response={200: list[EdgeSnapshot], 400: Error, 404: Error, 422: Error})
def list_edges(request: HttpRequest, flow_id: str, execution_id: str, q: Query[EdgesQuery]) -> list[EdgeSnapshot]:
    """list_edges: the edges leaving (`outgoing`) or entering (`incoming`) one member, by edge id (a member
    without such edges, or an execution outside the flow, has none)."""
    backend = get_backend()
    eid = ExecutionId(execution_id)
    if flow_reads.read_head(backend, flow_id) is None:
        raise NotFound(f"flow not found: {flow_id}")
    return flow_reads.list_edges(backend, flow_id, q.direction, eid)


@router.get("/flows/{flow_id}/edges/{edge_id}", response={200: EdgeSnapshot, 400: Error, 404: Error})
def describe_edge(request: HttpRequest, flow_id: str, edge_id: str) -> EdgeSnapshot:
    """describe_edge: one edge as staged."""
    edge = flow_reads.describe_edge(get_backend(), flow_id, edge_id)
    if edge is None:
        raise NotFound(f"edge not found: {edge_id}")
    return edge


@router.put("/flows/{flow_id}/members/{execution_id}/edge-group-policy",
            response={200: str, 400: Error, 422: Error}, tags=["flows"])
def set_edge_group_policy(request: HttpRequest, flow_id: str, execution_id: str, body: EdgeGroupPolicyIn) -> str:
    """set_edge_group_policy: `"Set"`, or `"AlreadySet"` when that policy is in effect (nothing written); 400
    naming the policy field (malformed, or `policy.kind` once edges into the member exist), `flow_not_found`,
    `execution_not_in_flow`."""
    with audited(request, "set_edge_group_policy", execution_id, body.reason, detail=f"flow={flow_id}") as a:
        out = edge_groups.set_edge_group_policy(get_backend(), flow_id, execution_id, body.policy)
        a.changed = out == edge_groups.SET
    return "Set" if out == edge_groups.SET else "AlreadySet"
