"""/v1/executions/{id}/history and /v1/executions/{id}/attempts: what happened to an execution, and its attempts
with the traceback a failed handler raised (ours; not upstream routes)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Query, Router, Schema
from pydantic import Field

from ffcore.execution import history, tracebacks
from ffcore.execution.client import Client
from ffcore.ids import ExecutionId

from ..backend import get_backend
from .errors import NotFound
from .schemas import Error

router = Router(tags=["executions"])


class HistoryEntryOut(Schema):
    ts: int = Field(description="When, in ms since the epoch (server clock)")
    kind: str = Field(description="created, eligible, delayed, claimed, renewed, progress, frames, waitpoint, "
                                  "suspended, signal, resumed, failed, expired, revoked, reclaimed, "
                                  "cancelled, replayed, priority, tags, spend, completed, …")
    title: str
    actor: str = Field(description="Worker instance, operator, API token, scanner, or empty when not known")
    detail: str
    attempt: int | None


class HistoryOut(Schema):
    entries: list[HistoryEntryOut]
    next_cursor: str = Field(description="Pass as `cursor` for the next page; empty on the last page")
    total: int


class HistoryQuery(Schema):
    cursor: str = Field(default="", max_length=12, pattern=r"^\d*$")
    limit: int = Field(default=history.PAGE_SIZE, ge=1, le=history.PAGE_MAX)


class AttemptOut(Schema):
    attempt_index: int
    fields: dict[str, str] = Field(description="The attempt record (attempt_state, worker_instance_id, "
                                               "started_at, ended_at, failure_reason, failure_category, …)")
    traceback: str | None = Field(description="The traceback the handler raised (tail kept, ≤ 16 KiB), if any")


@router.get("/executions/{execution_id}/history", response={200: HistoryOut, 400: Error, 404: Error, 422: Error})
def get_history(request: HttpRequest, execution_id: str, q: Query[HistoryQuery]) -> dict[str, Any]:
    page = history.page(get_backend(), str(ExecutionId(execution_id)), q.cursor, q.limit)
    if page is None:
        raise NotFound(f"execution not found: {execution_id}")
    return {"entries": [e.as_dict() for e in page.entries], "next_cursor": page.next_cursor, "total": page.total}


def _attempts(execution_id: str) -> list[dict[str, Any]]:
    backend = get_backend()
    ex = Client(backend).get_execution(str(ExecutionId(execution_id)))
    if ex is None:
        raise NotFound(f"execution not found: {execution_id}")
    tbs = tracebacks.read_many(backend, str(ex.execution_id), [a.index for a in ex.attempts])
    return [{"attempt_index": a.index, "fields": a.fields, "traceback": tbs.get(a.index)} for a in ex.attempts]


@router.get("/executions/{execution_id}/attempts", response={200: list[AttemptOut], 400: Error, 404: Error})
def list_attempts(request: HttpRequest, execution_id: str) -> list[dict[str, Any]]:
    return _attempts(execution_id)


@router.get("/executions/{execution_id}/attempts/{attempt_index}",
            response={200: AttemptOut, 400: Error, 404: Error, 422: Error})
def get_attempt(request: HttpRequest, execution_id: str, attempt_index: int) -> dict[str, Any]:
    for a in _attempts(execution_id):
        if a["attempt_index"] == attempt_index:
            return a
    raise NotFound(f"attempt not found: {execution_id} #{attempt_index}")
