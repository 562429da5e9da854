"""/v1/executions: create, read, list, cancel, priority, replay, revoke (server.md §3.2 rows 1–11)."""

from __future__ import annotations

from typing import Any, Literal

from django.http import HttpRequest, HttpResponse
from ninja import Query, Router, Schema, Status
from pydantic import Field

from ffcore.backend import Backend
from ffcore.errors import InvalidInput
from ffcore.execution import listing
from ffcore.execution.client import Client
from ffcore.ids import ExecutionId
from ffcore.keys import ExecKeys
from ffcore.policy import policy_from_mapping
from ffcore.reads import core_refs

from ..backend import get_backend
from .audited import audited
from .errors import NotFound
from .schemas import REASON, BytesIn, Error, ReasonIn

router = Router(tags=["executions"])

LANE = Field(default="default", min_length=1, max_length=64, pattern=r"^[\x21-\x7e]+$")


class ExecutionIn(BytesIn):
    execution_id: str | None = Field(default=None, description="`{fp:N}:<uuid>`; minted if omitted")
    namespace: str = Field(default="default", min_length=1, max_length=256)
    lane_id: str = LANE
    execution_kind: str = Field(min_length=1, max_length=256)
    payload_encoding: str | None = None
    priority: int = Field(default=0, ge=-(2**31), le=2**31 - 1)
    creator_identity: str = Field(default="api", max_length=256)
    idempotency_key: str | None = Field(default=None, max_length=512)
    tags: dict[str, str] = Field(default_factory=dict)
    policy: dict[str, Any] | None = None
    delay_until: int | None = Field(default=None, ge=0)
    execution_deadline_at: int | None = Field(default=None, ge=0)
    partition_id: int | None = Field(default=None, ge=0, le=65535)
    now: int | None = None
    reason: str | None = REASON


class StateVectorOut(Schema):
    lifecycle_phase: str
    ownership_state: str
    eligibility_state: str
    blocking_reason: str
    terminal_outcome: str
    attempt_state: str
    public_state: str


class ExecutionOut(Schema):
    execution_id: str
    namespace: str
    lane_id: str
    priority: int
    execution_kind: str
    state_vector: StateVectorOut
    public_state: str
    created_at: str
    started_at: str | None = None
    completed_at: str | None = None
    current_attempt_index: int
    flow_id: str | None
    blocking_detail: str


class CancelIn(Schema):
    execution_id: str | None = None
    reason: str = Field(min_length=1, max_length=1000)
    source: str = Field(default="operator_override", max_length=64)
    lease_id: str | None = None
    lease_epoch: int | None = Field(default=None, ge=0)
    attempt_id: str | None = None
    now: int | None = None


class PriorityIn(Schema):
    new_priority: int = Field(ge=-(2**31), le=2**31 - 1)
    reason: str | None = REASON


class ListQuery(Schema):
    partition: int | None = Field(default=None, ge=0, le=65535,
                                  description="With it (and no browse parameter): one lane index of that partition, "
                                              "offset paging (upstream's listing). Without it: browse.")
    lane: str | None = Field(default=None, min_length=1, max_length=64, pattern=r"^[\x21-\x7e]+$",
                             description="Index listing: the lane (default `default`). Browse: a lane filter.")
    state: Literal["eligible", "delayed", "terminal", "suspended", "active"] | None = Field(
        default=None, description="Index listing only: the lane index (default `eligible`).")
    limit: int = Field(default=50, ge=1, le=100_000, description="Index listing: up to 1000; browse: up to 500.")
    offset: int | None = Field(default=None, ge=0, le=2**53 - 1,  # Valkey LIMIT takes an i64
                               description="Index listing only.")
    # Browse (newest first across partitions, the dashboard's list): any of these selects it.
    public_state: str | None = Field(default=None, max_length=32, description="Browse: a public state filter.")
    kind: str | None = Field(default=None, min_length=1, max_length=256, description="Browse: an execution kind.")
    tag: str | None = Field(default=None, min_length=3, max_length=4300, description="Browse: `key=value`.")
    created_from: int | None = Field(default=None, ge=0, description="Browse: created at or after (ms).")
    created_to: int | None = Field(default=None, ge=0, description="Browse: created at or before (ms).")
    order: Literal["newest", "oldest"] | None = Field(default=None, description="Browse: sort (default newest).")
    cursor: str | None = Field(default=None, max_length=600,
                               description="Browse: `next_cursor` (or `prev_cursor` with direction=prev) of a page.")
    direction: Literal["next", "prev"] | None = Field(default=None, description="Browse: page after or before "
                                                                                "the cursor.")

    def browsing(self) -> bool:
        return self.partition is None or any(
            v is not None for v in (self.public_state, self.kind, self.tag, self.created_from, self.created_to,
                                    self.order, self.cursor, self.direction))


def _eid(execution_id: str) -> ExecutionId:
    return ExecutionId(execution_id)


@router.post("/executions", response={201: dict[str, Any], 200: dict[str, Any], 400: Error, 422: Error})
def create_execution(request: HttpRequest, body: ExecutionIn) -> Status:
    """Create an execution: 201 `{"Created": …}`, or 200 `{"Duplicate": …}` for a known idempotency key."""
    c = Client(get_backend())
    if body.execution_id is not None:
        eid = _eid(body.execution_id)
        if body.partition_id is not None and body.partition_id != eid.partition_index:
            raise InvalidInput("invalid_input", ["partition_id does not match the execution id's partition"])
    else:
        eid = c.mint(body.lane_id, body.idempotency_key)
    policy = policy_from_mapping(body.policy)
    with audited(request, "create", eid, body.reason, detail=f"kind={body.execution_kind} lane={body.lane_id}") as a:
        res = c.create(kind=body.execution_kind, lane=body.lane_id, namespace=body.namespace,
                       payload=body.payload_bytes(), priority=body.priority, delay_until=body.delay_until,
                       deadline_at=body.execution_deadline_at, idempotency_key=body.idempotency_key, tags=body.tags,
                       policy=policy, creator=body.creator_identity, execution_id=eid)
        a.target = res.execution_id
        if res.duplicate:
            a.detail += " (duplicate idempotency key: nothing created)"
    if res.duplicate:
        return Status(200, {"Duplicate": {"execution_id": res.execution_id}})
    return Status(201, {"Created": {"execution_id": res.execution_id, "public_state": "waiting"}})


@router.get("/executions", response={200: dict[str, Any], 400: Error, 422: Error})
def list_executions(request: HttpRequest, q: Query[ListQuery]) -> dict[str, Any]:
    """With `partition` alone: one lane index of that partition in score order (offset paging, as upstream;
    limit capped at 1000). Without it, or with a browse parameter: newest (or oldest) first across partitions
    with the dashboard list's filters, paged by `next_cursor` / `prev_cursor`."""
    backend = get_backend()
    if not q.browsing():
        assert q.partition is not None  # not browsing: partition given
        rows = Client(backend).list_range(q.partition, q.lane or "default", q.state or "eligible",
                                          offset=q.offset or 0, limit=min(q.limit, 1000))
        return {"executions": rows, "total_returned": len(rows)}
    page = _browse(backend, q)
    return {"executions": page.rows, "total_returned": len(page.rows), "next_cursor": page.next_cursor,
            "prev_cursor": page.prev_cursor}


def _browse(backend: Backend, q: ListQuery) -> listing.ListPage:
    """The browse listing; a parameter of the index listing, or a bad filter, is a 400 naming it."""
    if q.state is not None:
        raise InvalidInput("invalid_input", ["state: names a lane index (with partition alone); browse filters by "
                                             "public_state"])
    if q.offset is not None:
        raise InvalidInput("invalid_input", ["offset: browse pages by cursor"])
    if q.limit > 500:
        raise InvalidInput("invalid_input", ["limit: browse takes at most 500"])
    if q.public_state is not None and q.public_state not in listing.STATE_INDEXES:
        raise InvalidInput("invalid_input", [f"public_state: {q.public_state!r} is not a public state"])
    tag = None
    if q.tag is not None:
        if "=" not in q.tag:
            raise InvalidInput("invalid_input", ["tag: write it as key=value"])
        key, value = q.tag.split("=", 1)
        tag = (key, value)
    if q.created_from is not None and q.created_to is not None and q.created_from > q.created_to:
        raise InvalidInput("invalid_input", ["created_to: before created_from"])
    if q.direction == "prev" and not q.cursor:
        raise InvalidInput("invalid_input", ["cursor: direction=prev needs the prev_cursor of a page"])
    try:
        listing.parse_cursor(q.cursor)
    except InvalidInput:
        raise InvalidInput("invalid_input", ["cursor: malformed; use a page's next_cursor or prev_cursor"]) from None
    query = listing.Query(lane=q.lane, state=q.public_state, kind=q.kind, tag=tag, cursor=q.cursor, limit=q.limit,
                          order=q.order or "newest", created_from=q.created_from, created_to=q.created_to,
                          direction=q.direction or "next", partition=q.partition)
    return listing.list_executions(backend, query, Client(backend).lanes())


def _info(core: dict[str, str]) -> dict[str, Any]:
    sv = {k: core.get(k, "") for k in StateVectorOut.model_fields}
    idx = core.get("current_attempt_index", "")
    return {
        "execution_id": core["execution_id"], "namespace": core.get("namespace", ""),
        "lane_id": core.get("lane_id", ""), "priority": int(float(core.get("priority") or 0)),
        "execution_kind": core.get("execution_kind", ""), "state_vector": sv, "public_state": sv["public_state"],
        "created_at": core.get("created_at", ""), "started_at": core.get("started_at") or None,
        "completed_at": core.get("completed_at") or None, "current_attempt_index": int(idx) if idx.isdigit() else 0,
        "flow_id": core.get("flow_id") or None, "blocking_detail": core.get("blocking_detail", ""),
    }


@router.get("/executions/{execution_id}", response={200: ExecutionOut, 400: Error, 404: Error})
def get_execution(request: HttpRequest, execution_id: str) -> dict[str, Any]:
    ex = Client(get_backend()).get_execution(_eid(execution_id), with_attempts=False)
    if ex is None:
        raise NotFound(f"execution not found: {execution_id}")
    return _info(ex.core)


@router.get("/executions/{execution_id}/state", response={200: str, 400: Error, 404: Error})
def get_execution_state(request: HttpRequest, execution_id: str) -> str:
    st = Client(get_backend()).get_state(_eid(execution_id))
    if st is None:
        raise NotFound(f"execution not found: {execution_id}")
    return st.value


@router.get("/executions/{execution_id}/result", response={200: None, 400: Error, 404: Error})
def get_execution_result(request: HttpRequest, execution_id: str) -> HttpResponse:
    """The raw result bytes (`application/octet-stream`)."""
    data = Client(get_backend()).get_result(_eid(execution_id))
    if data is None:
        raise NotFound(f"execution result not found: {execution_id}")
    return HttpResponse(data, content_type="application/octet-stream")


def _match(path_id: ExecutionId, body_id: str | None) -> None:
    if body_id is not None and body_id != path_id:
        raise InvalidInput("invalid_input", ["path execution_id does not match body execution_id"])


@router.post("/executions/{execution_id}/cancel", response={200: dict[str, Any], 400: Error, 422: Error})
def cancel_execution(request: HttpRequest, execution_id: str, body: CancelIn) -> dict[str, Any]:
    eid = _eid(execution_id)
    _match(eid, body.execution_id)
    with audited(request, "cancel", eid, body.reason):
        Client(get_backend()).cancel(eid, reason=body.reason, source=body.source, lease_id=body.lease_id or "",
                                     lease_epoch="" if body.lease_epoch is None else str(body.lease_epoch))
    return {"Cancelled": {"execution_id": eid, "public_state": "cancelled"}}


@router.put("/executions/{execution_id}/priority", response={200: dict[str, Any], 400: Error, 422: Error})
def change_priority(request: HttpRequest, execution_id: str, body: PriorityIn) -> dict[str, Any]:
    eid = _eid(execution_id)
    with audited(request, "change_priority", eid, body.reason, detail=f"priority={body.new_priority}"):
        Client(get_backend()).change_priority(eid, body.new_priority)
    return {"Changed": {"execution_id": eid}}


@router.post("/executions/{execution_id}/replay", response={200: dict[str, Any], 400: Error})
def replay_execution(request: HttpRequest, execution_id: str, body: ReasonIn | None = None) -> dict[str, Any]:
    eid = _eid(execution_id)
    with audited(request, "replay", eid, body.reason if body else None):
        reply = Client(get_backend()).replay(eid)
    return {"Replayed": {"public_state": "waiting" if reply[0] == "0" else "waiting_children"}}


@router.post("/executions/{execution_id}/revoke-lease", response={200: dict[str, Any], 400: Error, 404: Error})
def revoke_lease(request: HttpRequest, execution_id: str, body: ReasonIn | None = None) -> dict[str, Any]:
    eid = _eid(execution_id)
    backend = get_backend()
    refs = core_refs(backend, ExecKeys(eid))
    if not refs.worker_instance_id:
        raise NotFound(f"no active lease for execution {eid}")
    reason = body.reason if body else None
    with audited(request, "revoke_lease", eid, reason):
        reply = Client(backend).revoke_lease(eid, reason=(reason or "operator_revoke")[:200])
    if reply.status == "ALREADY_SATISFIED":
        return {"AlreadySatisfied": {"reason": reply[0]}}
    return {"Revoked": {"lease_id": reply[1], "lease_epoch": reply[2]}}
