"""Budgets and quota policies (server.md §3.2 rows 20–24; §2.6)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Router, Schema, Status
from pydantic import Field, field_validator, model_validator

from ffcore.budgets import budgets, quotas
from ffcore.budgets.reset import reset_and_release
from ffcore.ids import parse_budget_id, parse_quota_id

from ..backend import get_backend
from .audited import audited
from .errors import NotFound
from .schemas import REASON, Error, ReasonIn

router = Router(tags=["budgets"])

U53 = 2**53 - 1
#: Stored limits and deltas stay exact in the library's number handling (Lua doubles, HINCRBY's i64).
LIMIT = Field(ge=0, le=U53)
NAME = Field(default="", max_length=256)


def _dim(name: str) -> str:
    bad = not name or len(name) > 200 or any(ord(c) < 0x20 or ord(c) == 0x7F or 0xD800 <= ord(c) <= 0xDFFF
                                             for c in name)
    if bad:
        raise ValueError(f"dimension name {name!r} must be 1..200 printable characters")
    return name


class CreateBudgetIn(Schema):
    budget_id: str | None = Field(default=None, description="UUID; minted when omitted")
    scope_type: str = Field(default="global", min_length=1, max_length=256)
    scope_id: str = NAME
    enforcement_mode: str = Field(default="strict", min_length=1, max_length=64)
    on_hard_limit: str = Field(default="block", min_length=1, max_length=64)
    on_soft_limit: str = Field(default="warn", min_length=1, max_length=64)
    reset_interval_ms: int = Field(default=0, ge=0, le=U53)
    dimensions: list[str] = Field(min_length=1, max_length=256)
    hard_limits: list[int] = Field(max_length=256)
    soft_limits: list[int] = Field(max_length=256)
    now: int | None = Field(default=None, ge=0, le=U53)
    reason: str | None = REASON

    @field_validator("budget_id")
    @classmethod
    def _id(cls, v: str | None) -> str | None:
        return None if v is None else parse_budget_id(v)

    @field_validator("dimensions")
    @classmethod
    def _dims(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError("dimension names must be distinct")
        return [_dim(d) for d in v]

    @field_validator("hard_limits", "soft_limits")
    @classmethod
    def _limits(cls, v: list[int]) -> list[int]:
        if any(not 0 <= x <= U53 for x in v):
            raise ValueError(f"every limit must be within 0..{U53} (0 = no limit)")
        return v

    @model_validator(mode="after")
    def _parallel(self) -> CreateBudgetIn:
        n = len(self.dimensions)
        for name in ("hard_limits", "soft_limits"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"{name} must have one entry per dimension ({n})")
        for d, h, s in zip(self.dimensions, self.hard_limits, self.soft_limits, strict=True):
            if h and s > h:
                raise ValueError(f"soft limit of {d} ({s}) is above its hard limit ({h})")
        return self


class UsageIn(Schema):
    dimensions: dict[str, int] = Field(min_length=1, max_length=256, description="dimension -> delta (≥ 0)")
    now: int | None = Field(default=None, ge=0, le=U53)
    dedup_key: str | None = Field(default=None, max_length=512)
    reason: str | None = REASON

    @field_validator("dimensions")
    @classmethod
    def _deltas(cls, v: dict[str, int]) -> dict[str, int]:
        for d, x in v.items():
            _dim(d)
            if not 0 <= x <= U53:
                raise ValueError(f"delta of {d} must be within 0..{U53}")
        return v


class CreateQuotaIn(Schema):
    quota_policy_id: str | None = Field(default=None, description="UUID; minted when omitted")
    window_seconds: int = Field(ge=0, le=10**9)
    max_requests_per_window: int = Field(default=0, ge=0, le=U53)
    max_concurrent: int = Field(default=0, ge=0, le=U53)
    now: int | None = Field(default=None, ge=0, le=U53)
    reason: str | None = REASON

    @field_validator("quota_policy_id")
    @classmethod
    def _id(cls, v: str | None) -> str | None:
        return None if v is None else parse_quota_id(v)


class BudgetStatusOut(Schema):
    budget_id: str
    scope_type: str
    scope_id: str
    enforcement_mode: str
    usage: dict[str, int]
    hard_limits: dict[str, int]
    soft_limits: dict[str, int]
    breach_count: int
    soft_breach_count: int
    last_breach_at: str | None
    last_breach_dim: str | None
    next_reset_at: str | None
    created_at: str | None
    breached_at: str | None = Field(default=None, description="ours: when the budget reconciler first saw this "
                                    "lifetime budget at a hard limit (ms); null when not breached")


def _int(v: str) -> int:
    try:
        return int(v or 0)
    except ValueError:
        return 0


@router.post("/budgets", response={201: dict[str, Any], 200: dict[str, Any], 400: Error, 422: Error})
def create_budget(request: HttpRequest, body: CreateBudgetIn) -> Status:
    """201 `{"Created": {budget_id}}`, or 200 `{"AlreadySatisfied": {budget_id}}` (the stored one is kept)."""
    with audited(request, "create_budget", body.budget_id or "", body.reason) as a:
        bid, created = budgets.create_budget(
            get_backend(), hard=dict(zip(body.dimensions, body.hard_limits, strict=True)),
            soft=dict(zip(body.dimensions, body.soft_limits, strict=True)), reset_interval_ms=body.reset_interval_ms,
            budget_id=body.budget_id, scope_type=body.scope_type, scope_id=body.scope_id,
            enforcement_mode=body.enforcement_mode, on_hard_limit=body.on_hard_limit,
            on_soft_limit=body.on_soft_limit, now_ms=body.now)
        a.target = f"budget:{bid}"
        a.detail = "created" if created else "already existed (kept)"
    out = {"budget_id": bid}
    return Status(201, {"Created": out}) if created else Status(200, {"AlreadySatisfied": out})


@router.get("/budgets/{budget_id}", response={200: BudgetStatusOut, 400: Error, 404: Error})
def get_budget(request: HttpRequest, budget_id: str) -> dict[str, Any]:
    st = budgets.get_budget(get_backend(), parse_budget_id(budget_id), blocked_limit=0, with_burn=False)
    if st is None:
        raise NotFound(f"budget not found: {budget_id}")
    d = st.definition
    return {
        "budget_id": st.budget_id, "scope_type": d.get("scope_type", ""), "scope_id": d.get("scope_id", ""),
        "enforcement_mode": d.get("enforcement_mode", ""),
        "usage": {x.name: x.usage for x in st.dimensions},
        "hard_limits": {x.name: x.hard for x in st.dimensions},  # 0 = no limit
        "soft_limits": {x.name: x.soft for x in st.dimensions},
        "breach_count": _int(d.get("breach_count", "")), "soft_breach_count": _int(d.get("soft_breach_count", "")),
        **{f: d.get(f) or None for f in ("last_breach_at", "last_breach_dim", "next_reset_at", "created_at")},
        "breached_at": str(st.breached_at) if st.breached_at else None,
    }


def _known(budget_id: str) -> str:
    bid = parse_budget_id(budget_id)
    if not budgets.read_budgets(get_backend(), [bid]):
        # The library has no existence check: it would accumulate usage on (or create a stub of) an unknown id.
        raise NotFound(f"budget not found: {budget_id}")
    return bid


@router.post("/budgets/{budget_id}/usage", response={200: Any, 400: Error, 404: Error, 422: Error})
def report_usage(request: HttpRequest, budget_id: str, body: UsageIn) -> Any:
    """`"Ok"`, `"AlreadyApplied"`, `{"SoftBreach": …}` (applied) or `{"HardBreach": …}` (nothing applied)."""
    bid = _known(budget_id)
    with audited(request, "report_usage", f"budget:{bid}", body.reason) as a:
        r = budgets.report_usage(get_backend(), bid, body.dimensions, body.dedup_key or "", body.now)
        a.detail = f"{r.status}: " + " ".join(f"{d}+{x}" for d, x in sorted(body.dimensions.items()))[:200]
    if r.status == "ok":
        return "Ok"
    if r.status == "already_applied":
        return "AlreadyApplied"
    if r.status == "soft_breach":
        return {"SoftBreach": {"dimension": r.dimension, "current_usage": r.current, "soft_limit": r.limit}}
    return {"HardBreach": {"dimension": r.dimension, "current_usage": r.current, "hard_limit": r.limit}}


@router.post("/budgets/{budget_id}/reset", response={200: dict[str, Any], 400: Error, 404: Error})
def reset_budget(request: HttpRequest, budget_id: str, body: ReasonIn | None = None) -> dict[str, Any]:
    """Zero usage now (server clock) and let the executions the budget held back run again."""
    bid = _known(budget_id)
    with audited(request, "reset_budget", f"budget:{bid}", body.reason if body else None) as a:
        out = reset_and_release(get_backend(), bid)
        a.detail = f"unblocked={out.unblocked}"
    return {"Reset": {"next_reset_at": out.next_reset_at}}


@router.post("/quotas", response={201: dict[str, Any], 200: dict[str, Any], 400: Error, 422: Error})
def create_quota_policy(request: HttpRequest, body: CreateQuotaIn) -> Status:
    """201 `{"Created": {quota_policy_id}}`, or 200 `{"AlreadySatisfied": …}` for an existing id."""
    with audited(request, "create_quota", body.quota_policy_id or "", body.reason) as a:
        qid, created = quotas.create_quota_policy(
            get_backend(), window_seconds=body.window_seconds, max_requests_per_window=body.max_requests_per_window,
            max_concurrent=body.max_concurrent, quota_id=body.quota_policy_id, now_ms=body.now)
        a.target = f"quota:{qid}"
        a.detail = "created" if created else "already existed (kept)"
    body_out = {"quota_policy_id": qid}
    return Status(201, {"Created": body_out}) if created else Status(200, {"AlreadySatisfied": body_out})
