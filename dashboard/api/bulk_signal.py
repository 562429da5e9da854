"""Bulk signal (the REST door of the inbox's bulk signal): one operator signal to many open waitpoints, named
one by one or chosen by the inbox filters, run as a background bulk job by the same action as the page
(`dashboard.actions.waitpoints.bulk_signal_start`: one audit row per job, one entry per waitpoint in it); and
the job's progress. Every check runs before the job starts: a bad request delivers nothing."""

from __future__ import annotations

import re
import uuid
from typing import Any, Literal

from django.http import HttpRequest
from ninja import Router, Schema, Status
from pydantic import Field, field_validator

from ffcore.errors import FFError
from ffcore.execution import bulk
from ffcore.execution.client import Client
from ffcore.ids import ExecutionId, parse_waitpoint_id
from ffcore.suspension.inbox import InboxQuery

from ..actions import waitpoints as actions
from ..backend import get_backend
from ..waitpoint_forms import MAX_PAYLOAD_BYTES
from .access import principal
from .errors import NotFound
from .schemas import REASON, Error, Payload, PayloadChecks

router = Router(tags=["signals"])

#: The page's rule for a signal name: 1-200 characters without control characters.
_NAME = re.compile(r"^[^\x00-\x1f\x7f]{1,200}\Z")


class BulkTargetIn(Schema):
    execution_id: str
    waitpoint_id: str

    @field_validator("execution_id")
    @classmethod
    def _eid(cls, v: str) -> str:
        return ExecutionId(v)

    @field_validator("waitpoint_id")
    @classmethod
    def _wp(cls, v: str) -> str:
        return parse_waitpoint_id(v)


class InboxFilterIn(Schema):
    """The inbox page's filters; every waitpoint they match (up to the bulk cap) is signalled."""

    lane: str | None = Field(default=None, max_length=256)
    kind: str | None = Field(default=None, max_length=256)
    state: Literal["pending", "active"] | None = None
    signal: str | None = Field(default=None, max_length=200, description="Waitpoints expecting this name "
                                                                          "(wildcards included)")
    execution: str | None = Field(default=None, description="One execution's waitpoints")

    @field_validator("execution")
    @classmethod
    def _eid(cls, v: str | None) -> str | None:
        return None if v is None else ExecutionId(v)


class BulkSignalIn(PayloadChecks):
    """`targets` or `filter`, not both. The signal is an operator's (category and source `operator`, the
    caller as source identity), delivered with each waitpoint's stored token."""

    signal_name: str = Field(min_length=1, max_length=200)
    payload: list[int] | None = Field(default=None, max_length=MAX_PAYLOAD_BYTES)
    payload_b64: str | None = Field(default=None, max_length=MAX_PAYLOAD_BYTES * 4 // 3 + 4)
    targets: list[BulkTargetIn] | None = Field(default=None, min_length=1, max_length=bulk.BULK_CAP,
                                               description="The waitpoints, in order (repeats are sent once)")
    filter: InboxFilterIn | None = None
    expect_count: int | None = Field(default=None, ge=0, le=bulk.BULK_CAP,
                                     description="With `filter`: the count the caller expects (e.g. from a "
                                                 "listing); another count is a 409 and nothing is sent")
    reason: str | None = REASON

    @field_validator("signal_name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME.match(v):
            raise ValueError("a signal name is 1-200 characters without control characters")
        return v

    def checked_payload(self) -> bytes:
        """The payload, after the checks across fields (each a 400 naming its field)."""
        if (self.targets is None) == (self.filter is None):
            raise ValueError("targets / filter: send exactly one of them")
        if self.expect_count is not None and self.filter is None:
            raise ValueError("expect_count goes with filter")
        payload = Payload.decode(self.payload, self.payload_b64, "payload")
        if len(payload) > MAX_PAYLOAD_BYTES:
            raise ValueError(f"payload: {len(payload)} bytes; at most {MAX_PAYLOAD_BYTES}")
        return payload


class BulkJobOut(Schema):
    job_id: str
    action: str
    state: Literal["running", "finished"]
    total: int
    done: int
    ok: int
    failed: int
    error: str | None = Field(default=None, description="Why the job stopped early, when it did")
    results: list[dict[str, Any]] = Field(description='Per target, in order: `{"id": <execution id>, "ok": …, '
                                                      '"code": <the effect or the refusal>}` (first 1000)')


def _targets(body: BulkSignalIn) -> list[tuple[str, str]]:
    if body.targets is not None:
        return list(dict.fromkeys((t.execution_id, t.waitpoint_id) for t in body.targets))
    f = body.filter
    assert f is not None  # checked_payload refused neither and both
    backend = get_backend()
    got = bulk.collect_waitpoints(backend, InboxQuery(lane=f.lane, kind=f.kind, state=f.state, signal=f.signal,
                                                      execution=f.execution), Client(backend).lanes())
    if got.capped:
        raise FFError(f"more than {bulk.BULK_CAP} waitpoints match the filter: narrow it")
    if not got.targets:
        raise ValueError("filter: no open waitpoint matches it")
    if body.expect_count is not None and len(got.targets) != body.expect_count:
        raise FFError(f"expect_count: {len(got.targets)} waitpoints match the filter, not {body.expect_count}")
    return got.targets


def _job(job_id: str) -> dict[str, Any]:
    st = bulk.status(get_backend(), job_id)
    if st is None:
        raise NotFound(f"bulk job not found: {job_id}")
    f = st.fields
    return {"job_id": st.job, "action": f.get("action", ""), "state": f.get("state", "running"), "total": st.total,
            "done": st.done, "ok": int(f.get("ok") or 0), "failed": int(f.get("failed") or 0),
            "error": f.get("error"), "results": st.results}


@router.post("/waitpoints/bulk-signal", response={202: BulkJobOut, 400: Error, 409: Error, 422: Error})
def bulk_signal(request: HttpRequest, body: BulkSignalIn) -> Status:
    """Start a bulk signal job: 202 with the job (poll `GET /v1/bulk-jobs/{job_id}`). 409 when the filter
    matches more than the bulk cap or not `expect_count`; 400/422 naming the field for bad input — in every
    refusal nothing is sent."""
    payload = body.checked_payload()
    targets = _targets(body)
    job = actions.bulk_signal_start(get_backend(), principal(request).actor, body.reason or "", targets,
                                    name=body.signal_name, payload=payload)
    return Status(202, _job(job))


@router.get("/bulk-jobs/{job_id}", response={200: BulkJobOut, 400: Error, 404: Error})
def bulk_job(request: HttpRequest, job_id: str) -> dict[str, Any]:
    """A bulk job's progress and per-target results (jobs are kept a day); 400 for an id that is not a UUID."""
    try:
        uuid.UUID(job_id)
    except ValueError:
        raise ValueError(f"job_id is not a UUID: {job_id!r}") from None
    return _job(job_id)
