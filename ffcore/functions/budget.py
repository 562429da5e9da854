"""FCALL builders of budget.lua + quota.lua: budgets, usage, quota policies and admission (§5.31–§5.38).

The admission block/unblock builders (§5.34–§5.35) run on the execution's partition and live in
`lifecycle.py`; everything here runs on a budget `{b:M}` or quota `{q:K}` partition.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..keys import BudgetKeys, QuotaKeys
from .base import Arg, Call, fn, parse_bare


@fn("ff_create_budget")
def create_budget(
    b: BudgetKeys, *, scope_type: str, scope_id: str, enforcement_mode: str, on_hard_limit: str,
    on_soft_limit: str, reset_interval_ms: int, now_ms: int, dimensions: Sequence[str], hard: Sequence[int],
    soft: Sequence[int],
) -> Call:
    """The three sequences are parallel (the Lua trusts that; callers validate)."""
    args: list[Arg] = [b.budget_id, scope_type, scope_id, enforcement_mode, on_hard_limit, on_soft_limit,
                       reset_interval_ms, now_ms, len(dimensions), *dimensions, *hard, *soft]
    return Call("ff_create_budget", [b.definition, b.limits, b.usage, b.resets_index, b.policies_index], args)


@fn("ff_report_usage_and_check")
def report_usage_and_check(b: BudgetKeys, deltas: Sequence[tuple[str, int]], *, now_ms: int,
                           dedup_key: str = "") -> Call:
    """`dedup_key` is the caller's id; the full `ff:usagededup:{b:M}:<id>` key goes in ARGV (contract §3.4)."""
    args: list[Arg] = [len(deltas), *(d for d, _ in deltas), *(v for _, v in deltas), now_ms,
                       b.usage_dedup(dedup_key) if dedup_key else ""]
    return Call("ff_report_usage_and_check", [b.usage, b.limits, b.definition], args)


@fn("ff_reset_budget")
def reset_budget(b: BudgetKeys, *, now_ms: int) -> Call:
    return Call("ff_reset_budget", [b.definition, b.usage, b.resets_index], [b.budget_id, now_ms])


@fn("ff_create_quota_policy")
def create_quota_policy(q: QuotaKeys, *, window_seconds: int, max_requests_per_window: int, max_concurrent: int,
                        now_ms: int) -> Call:
    return Call("ff_create_quota_policy", [q.definition, q.window(), q.concurrency, q.admitted_set,
                                           q.policies_index],
                [q.quota_id, window_seconds, max_requests_per_window, max_concurrent, now_ms])


@fn("ff_check_admission_and_record")
def check_admission_and_record(q: QuotaKeys, eid: str, *, now_ms: int, window_seconds: int, rate_limit: int,
                               concurrency_cap: int, jitter_ms: int = 0) -> Call:
    """Replies `ADMITTED` / `ALREADY_ADMITTED` / `RATE_EXCEEDED retry_after_ms` / `CONCURRENCY_EXCEEDED`."""
    return Call("ff_check_admission_and_record", [q.window(), q.concurrency, q.definition, q.admitted(eid),
                                                  q.admitted_set],
                [now_ms, window_seconds, rate_limit, concurrency_cap, eid, jitter_ms], parse_bare)


@fn("ff_release_admission")
def release_admission(q: QuotaKeys, eid: str) -> Call:
    return Call("ff_release_admission", [q.admitted(eid), q.admitted_set, q.concurrency], [eid])


__all__ = ["check_admission_and_record", "create_budget", "create_quota_policy", "release_admission",
           "report_usage_and_check", "reset_budget"]
