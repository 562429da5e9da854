"""Per-execution spend on budgets (operations §9.4 record_spend, §9.5 release_budget; #24 item 5).

`POST /v1/budgets/{id}/spend` answers like a usage report (`"Ok"`, `"AlreadyApplied"`, `{"SoftBreach": …}`
applied, `{"HardBreach": …}` nothing applied); `POST /v1/budgets/{id}/release` gives one execution's
ledger back (`{"Released": {…}}` or `{"Noop": {…}}` when it had none). Reads: a budget's ledgers and an
execution's spend on every budget.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Query, Router, Schema
from pydantic import Field

from ffcore.budgets import spend
from ffcore.ids import ExecutionId
from ffcore.keys import ExecKeys

from ..backend import get_backend
from .audited import audited
from .budgets import U53, _known
from .errors import NotFound
from .schemas import REASON, Error

router = Router(tags=["budgets"])


class SpendIn(Schema):
    execution_id: str = Field(description="`{fp:N}:<uuid>` the spend is attributed to")
    deltas: dict[str, int] = Field(description="dimension → delta (0..2^53-1); at most 64")
    idempotency_key: str = Field(default="", max_length=512, description="applies once per budget partition "
                                                                        "for 24 h; \"\" = no dedup")
    now: int | None = Field(default=None, ge=0, le=U53)
    reason: str | None = REASON


class ReleaseIn(Schema):
    execution_id: str
    reason: str | None = REASON


class LedgersQuery(Schema):
    limit: int = Field(default=50, ge=1, le=500)


class LedgerOut(Schema):
    budget_id: str
    execution_id: str
    spend: dict[str, int]
    total: int


class LedgersOut(Schema):
    count: int
    ledgers: list[LedgerOut]


def _ledger(x: spend.Ledger) -> dict[str, Any]:
    return {"budget_id": x.budget_id, "execution_id": x.execution_id, "spend": x.spend, "total": x.total}


@router.post("/budgets/{budget_id}/spend", response={200: Any, 400: Error, 404: Error, 422: Error})
def record_spend(request: HttpRequest, budget_id: str, body: SpendIn) -> Any:
    """Spend attributed to an execution: usage rules of a usage report plus the execution's ledger."""
    bid = _known(budget_id)
    eid = ExecutionId(body.execution_id)
    spend.check_spend(get_backend(), bid, body.deltas)  # refused input changes nothing and leaves no entry
    with audited(request, "record_spend", f"budget:{bid}", body.reason) as a:
        r = spend.record_spend(get_backend(), bid, eid, body.deltas, body.idempotency_key, now_ms=body.now)
        a.detail = f"{r.status} execution={eid}: " + " ".join(f"{d}+{x}" for d, x in sorted(body.deltas.items()))
        a.detail = a.detail[:300]
    if r.status == "ok":
        return "Ok"
    if r.status == "already_applied":
        return "AlreadyApplied"
    if r.status == "soft_breach":
        return {"SoftBreach": {"dimension": r.dimension, "current_usage": r.current, "soft_limit": r.limit}}
    return {"HardBreach": {"dimension": r.dimension, "current_usage": r.current, "hard_limit": r.limit}}


@router.post("/budgets/{budget_id}/release", response={200: dict[str, Any], 400: Error, 404: Error, 422: Error})
def release_budget(request: HttpRequest, budget_id: str, body: ReleaseIn) -> dict[str, Any]:
    """Give the execution's spend on this budget back (usage never below 0) and drop its ledger."""
    bid = _known(budget_id)
    eid = ExecutionId(body.execution_id)
    with audited(request, "release_budget", f"budget:{bid}", body.reason) as a:
        released = spend.release_budget(get_backend(), bid, eid)
        a.detail = f"{'released' if released else 'no ledger'} execution={eid}"
        a.changed = released
    out = {"budget_id": bid, "execution_id": eid}
    return {"Released": out} if released else {"Noop": out}


@router.get("/budgets/{budget_id}/spend", response={200: LedgersOut, 400: Error, 404: Error, 422: Error})
def budget_spend(request: HttpRequest, budget_id: str, q: Query[LedgersQuery]) -> dict[str, Any]:
    """The executions with spend on this budget (largest first, up to `limit`) and how many there are."""
    count, rows = spend.ledgers_of_budget(get_backend(), _known(budget_id), q.limit)
    return {"count": count, "ledgers": [_ledger(x) for x in rows]}


@router.get("/executions/{execution_id}/spend", response={200: list[LedgerOut], 400: Error, 404: Error})
def execution_spend(request: HttpRequest, execution_id: str) -> list[dict[str, Any]]:
    """The execution's spend, one entry per budget it has spent on."""
    eid = ExecutionId(execution_id)
    rows = spend.spend_of_execution(get_backend(), eid)
    if not rows and not get_backend().client.exists(ExecKeys(eid).core):
        raise NotFound(f"execution not found: {execution_id}")
    return [_ledger(x) for x in rows]
