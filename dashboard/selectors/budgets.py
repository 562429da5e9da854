"""Read models: budgets and quotas pages, and the execution detail's admission section."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ffcore.backend import Backend
from ffcore.budgets import admission, budgets, quotas, spend
from ffcore.budgets.budgets import BudgetStatus, Dimension
from ffcore.budgets.quotas import QuotaStatus
from ffcore.errors import InvalidId
from ffcore.execution.client import Execution
from ffcore.keys import ExecKeys
from ffcore.policy import parse_stored_policy
from ffcore.reads import text

from .sections import detail_section

#: Executions listed per budget / quota on its own page.
BLOCKED_SHOWN = 50
#: Executions listed with their spend on a budget's own page.
SPEND_SHOWN = 50


@dataclass(frozen=True)
class Gauge:
    """One <meter>: `low`/`high` make the browser colour it, `state` names the breach for CSS and tests."""

    label: str
    value: int
    max: int
    low: float | None
    high: float | None
    state: str
    soft: int = 0
    hard: int = 0


def gauge(d: Dimension) -> Gauge:
    top = d.hard or d.soft or max(d.usage, 1)
    # The hard limit is a breach when reached (the scheduler blocks at usage >= hard): put `high` just under it.
    high = d.hard - 0.5 if d.hard else None
    low = float(d.soft) if d.soft else high  # no soft band: green right up to the hard limit
    return Gauge(d.name, d.usage, max(top, d.usage), low, high, d.state, d.soft, d.hard)


@dataclass
class BudgetCard:
    status: BudgetStatus
    gauges: list[tuple[Gauge, Dimension]]
    blocked: list[dict[str, str]] = field(default_factory=list)
    #: Executions with spend on this budget (the budget's own page): their ledger and row, largest first.
    spend: list[tuple[spend.Ledger, dict[str, str]]] = field(default_factory=list)
    spend_count: int = 0


def _card(backend: Backend, st: BudgetStatus, with_blocked: bool = False) -> BudgetCard:
    rows: list[dict[str, str]] = []
    if with_blocked and st.blocked:
        rows = _exec_rows(backend, [e for e, _ in st.blocked])
    card = BudgetCard(st, [(gauge(d), d) for d in st.dimensions], rows)
    if with_blocked:  # the budget's own page: who spent it
        card.spend_count, ledgers = spend.ledgers_of_budget(backend, st.budget_id, SPEND_SHOWN)
        card.spend = list(zip(ledgers, _exec_rows(backend, [x.execution_id for x in ledgers]), strict=True))
    return card


def budgets_page(backend: Backend) -> tuple[list[BudgetCard], int]:
    now = backend.now_ms()
    return [_card(backend, budgets.with_burn_rates(backend, st, now)) for st in budgets.list_budgets(backend)], now


def budget_page(backend: Backend, budget_id: str) -> tuple[BudgetCard | None, int]:
    now = backend.now_ms()
    try:
        st = budgets.get_budget(backend, budget_id, blocked_limit=BLOCKED_SHOWN, now_ms=now)
    except InvalidId:
        return None, now
    return (_card(backend, st, True) if st else None), now


_ROW_FIELDS = ("execution_kind", "lane_id", "public_state", "blocking_detail", "blocking_reason")


def _exec_rows(backend: Backend, eids: list[str]) -> list[dict[str, str]]:
    pipe = backend.client.pipeline(transaction=False)
    for e in eids:
        pipe.hmget(ExecKeys(e).core, _ROW_FIELDS)
    return [{"execution_id": e, **dict(zip(_ROW_FIELDS, map(text, vals), strict=True))}
            for e, vals in zip(eids, pipe.execute() if eids else [], strict=True)]


# ------------------------------------------------------------------ quotas
@dataclass
class QuotaCard:
    status: QuotaStatus
    rate: Gauge | None
    concurrency: Gauge | None
    waiting: list[dict[str, str]] = field(default_factory=list)


def _quota_card(backend: Backend, st: QuotaStatus, with_waiting: bool = False) -> QuotaCard:
    d = st.definition
    # low == high: green below the limit, red at it (a quota has no soft band).
    rate = Gauge("admissions in window", st.in_window, max(d.max_requests, st.in_window), d.max_requests - 0.5,
                 d.max_requests - 0.5, st.rate_state, hard=d.max_requests) if d.max_requests else None
    conc = Gauge("in flight", st.in_flight, max(d.cap, st.in_flight), d.cap - 0.5, d.cap - 0.5, st.cap_state,
                 hard=d.cap) if d.cap else None
    rows = _exec_rows(backend, [e for e, _ in st.waiting]) if with_waiting and st.waiting else []
    return QuotaCard(st, rate, conc, rows)


def quotas_page(backend: Backend) -> tuple[list[QuotaCard], int]:
    return [_quota_card(backend, st) for st in quotas.list_quotas(backend)], backend.now_ms()


def quota_page(backend: Backend, quota_id: str) -> tuple[QuotaCard | None, int]:
    try:
        st = quotas.get_quota(backend, quota_id, waiting_limit=BLOCKED_SHOWN)
    except InvalidId:
        return None, backend.now_ms()
    return (_quota_card(backend, st, True) if st else None), backend.now_ms()


# ------------------------------------------------------------------ execution detail
@dataclass
class AdmissionSection:
    #: ("budget" | "quota", id) that holds the execution back, if any.
    blocker: tuple[str, str] | None
    detail: str
    budgets: list[BudgetCard]
    quota: QuotaCard | None
    unknown: list[str]

    def __bool__(self) -> bool:
        return bool(self.blocker or self.budgets or self.quota or self.unknown)

    @property
    def because(self) -> str:
        """The block's detail without its "budget <id>: " prefix (the template links the id)."""
        return self.detail.split(": ", 1)[1] if ": " in self.detail else ""


@detail_section("admission")
def admission_section(backend: Backend, ex: Execution) -> Any:
    a = admission.attachments(ex.core, parse_stored_policy(ex.policy))
    cards = [_card(backend, st) for st in budgets.read_budgets(backend, a.budget_ids)]
    q = quotas.read_quotas(backend, [a.quota_id], backend.now_ms()) if a.quota_id else []
    known = {c.status.budget_id for c in cards} | {s.quota_id for s in q}
    unknown = [x for x in (*a.budget_ids, a.quota_id) if x and x not in known]
    return AdmissionSection(admission.blocker(ex.core), ex.core.get("blocking_detail", ""), cards,
                            _quota_card(backend, q[0]) if q else None, unknown)


@detail_section("spend")
def spend_section(backend: Backend, ex: Execution) -> list[spend.Ledger]:
    """The execution's spend per budget (operations §9.4): one pipeline over the budget ids."""
    return spend.spend_of_execution(backend, ex.execution_id)
