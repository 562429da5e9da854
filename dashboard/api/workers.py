"""/v1/workers/{worker_id}/claim: grant the next eligible execution to a worker after admission (server.md §3.2
row 12, operations §4.4); /v1/executions/{execution_id}/grant-and-claim: an operator takes one execution now
(operations §4.7, ours: the seed server has no route for it)."""

from __future__ import annotations

import re
from typing import Any

from django.http import HttpRequest, HttpResponse
from ninja import Router, Schema, Status
from pydantic import Field, field_validator

from ffcore.errors import InvalidInput, ScriptError
from ffcore.ids import ExecutionId
from ffcore.keys import ExecKeys
from ffcore.worker.grants import (
    TAKE_LEASE_MAX_MS,
    TAKE_LEASE_MIN_MS,
    ReclaimCapExceeded,
    ReclaimGranted,
    issue_grant_and_claim,
    issue_reclaim_grant,
)
from ffcore.worker.grants import claim_for_worker as schedule

from .. import audit_trail
from ..backend import get_backend
from .audited import audited
from .errors import NotFound
from .schemas import REASON, Error

router = Router(tags=["workers"])
_IDENT = re.compile(r"^[^\s\x00-\x1f\x7f]{1,256}\Z")


class ClaimIn(Schema):
    lane_id: str = Field(min_length=1, max_length=64, pattern=r"^[\x21-\x7e]+$")
    worker_instance_id: str = Field(min_length=1, max_length=256)
    capabilities: list[str] = Field(default_factory=list, max_length=256)
    grant_ttl_ms: int = Field(ge=1, le=60_000)
    reason: str | None = REASON

    @field_validator("worker_instance_id")
    @classmethod
    def _no_space(cls, v: str) -> str:
        if not _IDENT.match(v):
            raise ValueError("must be 1..256 characters without whitespace or control characters")
        return v

    @field_validator("capabilities")
    @classmethod
    def _caps(cls, v: list[str]) -> list[str]:
        for c in v:
            if not c or "," in c or not _IDENT.match(c):
                raise ValueError(f"capability {c!r} must be non-empty without commas, spaces or control characters")
        if len(",".join(sorted(set(v))).encode()) > 4096:
            raise ValueError("capabilities exceed 4096 bytes")
        return v


@router.post("/workers/{worker_id}/claim", response={200: dict[str, Any], 204: None, 400: Error, 422: Error})
def claim_for_worker(request: HttpRequest, worker_id: str, body: ClaimIn) -> Any:
    """Issue a claim grant for the next eligible execution of the lane; 204 when there is none."""
    if not _IDENT.match(worker_id):
        raise InvalidInput("invalid_input", ["worker_id must be 1..256 characters without whitespace"])
    with audited(request, "claim_grant", f"lane:{body.lane_id}", body.reason, detail=f"worker={worker_id}") as a:
        grant = schedule(get_backend(), lane=body.lane_id, worker_id=worker_id,
                         worker_instance_id=body.worker_instance_id,
                         capabilities_csv=",".join(sorted(set(body.capabilities))), grant_ttl_ms=body.grant_ttl_ms)
        if grant is None:
            a.changed = False  # nothing to grant: no entry
        else:
            a.target = grant.execution_id
    if grant is None:
        return HttpResponse(status=204)
    return grant.as_json()


class GrantAndClaimIn(Schema):
    lease_duration_ms: int = Field(ge=TAKE_LEASE_MIN_MS, le=TAKE_LEASE_MAX_MS,
                                   description="How long the operator's lease holds (also the grant's TTL)")
    lane_id: str | None = Field(default=None, min_length=1, max_length=64, pattern=r"^[\x21-\x7e]+$",
                                description="The execution's lane (read from the execution when absent)")
    reason: str = Field(min_length=1, max_length=1000, description="Why (required); kept in the audit trail")


class GrantAndClaimOut(Schema):
    lease_id: str
    lease_epoch: int
    attempt_index: int


@router.post("/executions/{execution_id}/grant-and-claim",
             response={200: GrantAndClaimOut, 400: Error, 404: Error, 422: Error})
def grant_and_claim(request: HttpRequest, execution_id: str, body: GrantAndClaimIn) -> Any:
    """Take the execution now: grant and claim it atomically (`ff_issue_grant_and_claim`), leased to the
    worker identity `operator` — no capability or admission check. Only an execution waiting for a worker
    (runnable, eligible now, no lease, no grant) can be taken; anything else is 400 with the engine's code
    (`execution_not_eligible`, `grant_already_exists`, …). Nobody renews the lease: when it runs out, a
    worker of the lane reclaims the execution."""
    eid = ExecutionId(execution_id)
    with audited(request, "grant_and_claim", eid, body.reason,
                 detail=audit_trail.take_detail(body.lease_duration_ms)) as a:
        try:
            taken = issue_grant_and_claim(get_backend(), eid, lease_duration_ms=body.lease_duration_ms,
                                          lane=body.lane_id)
        except ScriptError as e:
            if e.code == "execution_not_found":
                raise NotFound(f"execution not found: {eid}") from e
            raise
        a.detail = audit_trail.take_detail(body.lease_duration_ms, taken.lease_id, taken.lease_epoch,
                                           taken.attempt_index)
    return taken.as_json()


class ReclaimIn(Schema):
    worker_id: str = Field(min_length=1, max_length=256, description="The worker the grant is issued to")
    worker_instance_id: str = Field(min_length=1, max_length=256)
    capabilities: list[str] = Field(default_factory=list, max_length=256)
    grant_ttl_ms: int = Field(default=5000, ge=1, le=60_000)
    max_reclaim_count: int | None = Field(default=None, ge=1, le=1_000_000,
                                          description="Cap when the execution's policy sets none (default 100)")
    reason: str | None = REASON

    @field_validator("worker_id", "worker_instance_id")
    @classmethod
    def _no_space(cls, v: str) -> str:
        return ClaimIn._no_space(v)

    @field_validator("capabilities")
    @classmethod
    def _caps(cls, v: list[str]) -> list[str]:
        return ClaimIn._caps(v)


@router.post("/executions/{execution_id}/reclaim",
             response={200: dict[str, Any], 400: Error, 404: Error, 409: dict[str, Any], 422: Error})
def reclaim(request: HttpRequest, execution_id: str, body: ReclaimIn) -> Any:
    """Issue a reclaim grant (upstream v0.13, RFC-024) on an execution whose lease expired or was revoked, to
    the named worker, which takes it over with a new attempt (`claim_from_reclaim_grant` in the SDK).
    200 `{"outcome": "granted", "grant": {...}}`; 409 `{"outcome": "not_reclaimable", "detail"}` (not
    lease-expired / revoked, or a grant is already out) or `{"outcome": "reclaim_cap_exceeded",
    "reclaim_count"}` (its `max_reclaim_count` is used up; no grant is issued)."""
    eid = ExecutionId(execution_id)
    backend = get_backend()
    if not backend.client.exists(ExecKeys(eid).core):
        raise NotFound(f"execution not found: {eid}")
    with audited(request, "reclaim_grant", eid, body.reason, detail=f"worker={body.worker_id}") as a:
        out = issue_reclaim_grant(backend, eid, worker_id=body.worker_id, worker_instance_id=body.worker_instance_id,
                                  capabilities_csv=",".join(sorted(set(body.capabilities))),
                                  grant_ttl_ms=body.grant_ttl_ms, max_reclaim_count=body.max_reclaim_count)
        if isinstance(out, ReclaimGranted):
            return {"outcome": out.outcome, "grant": out.grant.as_json()}
        a.changed = False
    if isinstance(out, ReclaimCapExceeded):
        return Status(409, {"outcome": out.outcome, "execution_id": out.execution_id,
                            "reclaim_count": out.reclaim_count})
    return Status(409, {"outcome": out.outcome, "execution_id": out.execution_id, "detail": out.detail})
