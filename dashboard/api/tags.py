"""Tags after create (operations §3.2, §8.5; #24 item 4): read and write an execution's or a flow's tags.

Writes take `{"tags": {"<caller>.<field>": "value", …}, "reason": "…"}` (a reason is required: the change
is audited), are checked in full before anything is written, and answer `{"Ok": {"count": n}}` like
upstream's `SetExecutionTagsResult`. A key outside the `<caller>.<field>` rule is a 400 whose `kind` is
`invalid_tag_key` and whose message names the key.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Router, Schema
from pydantic import Field

from ffcore.execution.client import Client
from ffcore.execution.tags import check_tags
from ffcore.flows.flows import Flows
from ffcore.flows.tags import read_flow_tags
from ffcore.ids import ExecutionId, parse_flow_id
from ffcore.keys import ExecKeys
from ffcore.reads import decode_map

from ..backend import get_backend
from .audited import audited
from .errors import NotFound
from .schemas import Error

router = Router(tags=["tags"])


class TagsIn(Schema):
    tags: dict[str, str] = Field(description="`<caller>.<field>` → value: a–z, then a–z 0–9 _, a dot, then a "
                                             "non-dot character; at most 64 per call, values ≤ 4096 characters")
    reason: str = Field(min_length=1, max_length=1000, description="Why; kept in the audit trail")


class TagsOut(Schema):
    tags: dict[str, str]


def _detail(pairs: list[tuple[str, str]]) -> str:
    return " ".join(f"{k}={v}" for k, v in pairs)[:300]


@router.get("/executions/{execution_id}/tags", response={200: TagsOut, 400: Error, 404: Error})
def get_execution_tags(request: HttpRequest, execution_id: str) -> dict[str, Any]:
    k = ExecKeys(ExecutionId(execution_id))
    pipe = get_backend().client.pipeline(transaction=False)
    pipe.exists(k.core)
    pipe.hgetall(k.tags)
    exists, tags = pipe.execute()
    if not exists:
        raise NotFound(f"execution not found: {execution_id}")
    return {"tags": dict(sorted(decode_map(tags).items()))}


@router.post("/executions/{execution_id}/tags", response={200: dict[str, Any], 400: Error, 404: Error, 422: Error})
def set_execution_tags(request: HttpRequest, execution_id: str, body: TagsIn) -> dict[str, Any]:
    """Add or overwrite tags (existing ones not named are kept): `{"Ok": {"count": n}}`."""
    eid = ExecutionId(execution_id)
    pairs = check_tags(body.tags)  # refused input changes nothing and leaves no entry
    if not get_backend().client.exists(ExecKeys(eid).core):
        raise NotFound(f"execution not found: {execution_id}")
    with audited(request, "set_tags", eid, body.reason, detail=_detail(pairs)):
        count = Client(get_backend()).set_tags(eid, dict(pairs))
    return {"Ok": {"count": count}}


@router.get("/flows/{flow_id}/tags", response={200: TagsOut, 400: Error, 404: Error})
def get_flow_tags(request: HttpRequest, flow_id: str) -> dict[str, Any]:
    fid = parse_flow_id(flow_id)
    if not get_backend().client.exists(Flows(get_backend()).keys(fid).core):
        raise NotFound(f"flow not found: {flow_id}")
    return {"tags": read_flow_tags(get_backend(), fid)}


@router.post("/flows/{flow_id}/tags", response={200: dict[str, Any], 400: Error, 404: Error, 422: Error})
def set_flow_tags(request: HttpRequest, flow_id: str, body: TagsIn) -> dict[str, Any]:
    """Add or overwrite flow tags: `{"Ok": {"count": n}}`. The first write also moves legacy dotted fields
    off the flow record into its tags."""
    fid = parse_flow_id(flow_id)
    pairs = check_tags(body.tags)
    flows = Flows(get_backend())
    if not get_backend().client.exists(flows.keys(fid).core):
        raise NotFound(f"flow not found: {flow_id}")
    with audited(request, "set_flow_tags", fid, body.reason, detail=_detail(pairs)):
        count = flows.set_tags(fid, dict(pairs))
    return {"Ok": {"count": count}}
