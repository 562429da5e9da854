"""Waitpoints and signals: list an execution's open waitpoints, deliver a signal (server.md §3.2 rows 5, 8), and
read one waitpoint's raw token (upstream v0.8's admin route; the list never carries tokens)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from ninja import Router, Schema
from pydantic import Field, field_validator, model_validator

from ffcore.errors import ERRORS, ExecutionNotFound, InvalidInput
from ffcore.functions import Signal
from ffcore.ids import ExecutionId, parse_signal_id, parse_waitpoint_id
from ffcore.suspension.signals import Signals, waitpoint_token

from .. import audit_trail
from ..backend import get_backend
from .access import principal, require_token
from .audited import audited, note
from .errors import NotFound
from .schemas import REASON, Error, Payload, PayloadChecks

router = Router(tags=["signals"])

#: Upper bounds that keep every numeric argument a whole number the library can use as given.
MAX_MS = 365 * 86_400_000
TEXT = Field(default="", max_length=1024)


class PendingWaitpointOut(Schema):
    waitpoint_id: str
    execution_id: str
    waitpoint_key: str
    state: str
    token_kid: str = Field(description="The secret generation that minted the token")
    token_fingerprint: str = Field(description="First 16 hex of the token's digest (tells tokens apart; "
                                   "the token itself: GET …/waitpoints/{waitpoint_id}/token with the API token)")
    required_signal_names: list[str] = Field(description="Empty = any signal name (wildcard)")
    created_at: int
    activated_at: int | None = None
    expires_at: int | None = None


class SignalIn(PayloadChecks):
    """DeliverSignalArgs (server.md §2.3 #21); the payload as bytes 0..255 (`payload`) or `payload_b64`."""

    execution_id: str | None = Field(default=None, description="Optional; must match the path when given")
    waitpoint_id: str
    signal_id: str | None = Field(default=None, description="UUID; minted when omitted")
    signal_name: str = Field(min_length=1, max_length=256)
    signal_category: str = Field(default="external", max_length=256)
    source_type: str = Field(default="external", max_length=256)
    source_identity: str = Field(default="", max_length=256)
    payload: list[int] | None = None
    payload_b64: str | None = None
    payload_encoding: str = Field(default="json", min_length=1, max_length=64)
    correlation_id: str | None = TEXT
    idempotency_key: str | None = Field(default=None, max_length=512)
    target_scope: str = Field(default="waitpoint", min_length=1, max_length=64)
    created_at: int | None = Field(default=None, ge=0, le=2**53 - 1)
    dedup_ttl_ms: int = Field(default=86_400_000, ge=0, le=MAX_MS)
    resume_delay_ms: int = Field(default=0, ge=0, le=MAX_MS)
    max_signals_per_execution: int = Field(default=10_000, ge=0, le=10**9)
    signal_maxlen: int = Field(default=1000, ge=1, le=1_000_000)
    waitpoint_token: str = Field(max_length=1024)
    now: int | None = Field(default=None, ge=0, le=2**53 - 1)
    reason: str | None = REASON

    @field_validator("waitpoint_id")
    @classmethod
    def _wp(cls, v: str) -> str:
        return parse_waitpoint_id(v)

    @field_validator("signal_id")
    @classmethod
    def _sid(cls, v: str | None) -> str | None:
        return None if v is None else parse_signal_id(v)

    @model_validator(mode="after")
    def _one_form(self) -> SignalIn:
        Payload.decode(self.payload, self.payload_b64, "payload")
        return self

    def signal(self) -> Signal:
        return Signal(self.signal_name, category=self.signal_category, source_type=self.source_type,
                      source_identity=self.source_identity,
                      payload=Payload.decode(self.payload, self.payload_b64, "payload"),
                      payload_encoding=self.payload_encoding, idempotency_key=self.idempotency_key or "",
                      correlation_id=self.correlation_id or "", target_scope=self.target_scope,
                      created_at=self.created_at if self.created_at is not None else self.now,
                      dedup_ttl_ms=self.dedup_ttl_ms, resume_delay_ms=self.resume_delay_ms,
                      signal_maxlen=self.signal_maxlen, max_signals_per_execution=self.max_signals_per_execution)


@router.get("/executions/{execution_id}/pending-waitpoints",
            response={200: list[PendingWaitpointOut], 400: Error, 404: Error}, exclude_none=True)
def pending_waitpoints(request: HttpRequest, execution_id: str) -> list[Any]:
    """Open (pending/active) waitpoints of one execution, sorted by id. No raw tokens: `token_kid` and
    `token_fingerprint` identify them."""
    try:
        return list(Signals(get_backend()).pending_waitpoints(ExecutionId(execution_id)))
    except ExecutionNotFound:
        raise NotFound(f"execution not found: {execution_id}") from None


class TokenOut(Schema):
    waitpoint_id: str
    waitpoint_token: str = Field(description="Bearer credential for signal delivery: treat as a secret")


@router.get("/executions/{execution_id}/waitpoints/{waitpoint_id}/token",
            response={200: TokenOut, 400: Error, 403: Error, 404: Error})
def read_waitpoint_token(request: HttpRequest, response: HttpResponse, execution_id: str,
                         waitpoint_id: str) -> dict[str, str]:
    """The raw token of an open waitpoint — API token only (sessions and tokenless callers get 403); every
    read is audited and the answer is never cached."""
    require_token(request, "reading a waitpoint token")
    eid = ExecutionId(execution_id)
    wid = parse_waitpoint_id(waitpoint_id)
    response["Cache-Control"] = "no-store"
    token = waitpoint_token(get_backend(), eid, wid)
    if token is None:
        raise NotFound(f"no open waitpoint {wid} on execution {eid}")
    note(request, "read_waitpoint_token", eid, detail=f"waitpoint={wid}")
    return {"waitpoint_id": wid, "waitpoint_token": token}


@router.post("/executions/{execution_id}/signal", response={200: dict[str, Any], 400: Error, 422: Error})
def deliver_signal(request: HttpRequest, execution_id: str, body: SignalIn) -> dict[str, Any]:
    """Deliver a signal with the waitpoint's token: `{"Accepted": {signal_id, effect}}` or
    `{"Duplicate": {existing_signal_id}}`. A still-pending waitpoint buffers the signal."""
    eid = ExecutionId(execution_id)
    if body.execution_id is not None and body.execution_id != eid:
        raise InvalidInput("invalid_input", ["path execution_id does not match body execution_id"])
    sig = body.signal()
    with audited(request, "signal", eid, body.reason) as a:
        out = Signals(get_backend()).deliver(eid, body.waitpoint_id, sig, body.waitpoint_token,
                                             signal_id=body.signal_id)
        a.detail = audit_trail.signal_detail(body.waitpoint_id, body.signal_name, len(sig.payload),
                                             "duplicate" if out.duplicate else out.effect)
    if out.duplicate:
        return {"Duplicate": {"existing_signal_id": out.signal_id or body.signal_id or ""}}
    return {"Accepted": {"signal_id": out.signal_id, "effect": out.effect}}


class ApprovalSignalIn(Schema):
    """DeliverApprovalSignalArgs (operations §6.8): no token — the stored one is used."""

    lane_id: str = Field(min_length=1, max_length=64, description="Must equal the execution's lane")
    waitpoint_id: str
    signal_name: str = Field(min_length=1, max_length=256, description="`approved` / `rejected` by convention")
    idempotency_suffix: str = Field(min_length=1, max_length=256,
                                    description="The signal's idempotency key is approval:<signal_name>:<suffix>")
    signal_dedup_ttl_ms: int = Field(default=86_400_000, ge=1, le=MAX_MS)
    maxlen: int | None = Field(default=None, ge=1, le=1_000_000)
    max_signals_per_execution: int | None = Field(default=None, ge=0, le=10**9)
    reason: str | None = REASON

    @field_validator("waitpoint_id")
    @classmethod
    def _wp(cls, v: str) -> str:
        return parse_waitpoint_id(v)


@router.post("/executions/{execution_id}/approval-signal",
             response={200: dict[str, Any], 400: Error, 404: Error, 422: Error})
def deliver_approval_signal(request: HttpRequest, execution_id: str, body: ApprovalSignalIn) -> dict[str, Any]:
    """An operator's approval without the token (operations §6.8): `lane_id` must be the execution's lane
    (400 `invalid_input` lane_mismatch); a repeat with the same `idempotency_suffix` answers
    `{"Duplicate": {existing_signal_id}}`. Category `approval`, source `operator`, scope `execution`; the
    source identity is the caller. Audited."""
    eid = ExecutionId(execution_id)
    with audited(request, "approval_signal", eid, body.reason) as a:
        try:
            out = Signals(get_backend()).deliver_approval(
                eid, lane_id=body.lane_id, waitpoint_id=body.waitpoint_id, signal_name=body.signal_name,
                idempotency_suffix=body.idempotency_suffix, signal_dedup_ttl_ms=body.signal_dedup_ttl_ms,
                maxlen=body.maxlen, max_signals_per_execution=body.max_signals_per_execution,
                source_identity=principal(request).actor)
        except ExecutionNotFound:
            raise NotFound(f"execution not found: {eid}") from None
        except ERRORS["waitpoint_not_found"]:
            raise NotFound(f"no waitpoint {body.waitpoint_id} on execution {eid}") from None
        a.detail = audit_trail.signal_detail(body.waitpoint_id, body.signal_name, 0,
                                             "duplicate" if out.duplicate else out.effect)
    if out.duplicate:
        return {"Duplicate": {"existing_signal_id": out.signal_id}}
    return {"Accepted": {"signal_id": out.signal_id, "effect": out.effect}}
