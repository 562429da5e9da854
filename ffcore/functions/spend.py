"""FCALL builders of spend.lua (ours, under upstream's names): per-execution spend ledgers (operations §9.4,
§9.5) and the budget reconciler's `breached_at` marker."""

from __future__ import annotations

from collections.abc import Sequence

from ..keys import BudgetKeys
from .base import Arg, Call, fn


@fn("ff_record_spend")
def record_spend(b: BudgetKeys, eid: str, deltas: Sequence[tuple[str, int]], *, now_ms: int,
                 dedup_key: str = "") -> Call:
    """KEYS buse, blim, bdef, bex, bexi; ARGV N, N × (dim, delta), now, dedup key name, eid.

    `dedup_key` is the caller's idempotency key; the full `ff:usagededup:{b:M}:<key>` name goes in ARGV."""
    args: list[Arg] = [len(deltas), *(x for kv in deltas for x in kv), now_ms,
                       b.usage_dedup(dedup_key) if dedup_key else "", eid]
    return Call("ff_record_spend", [b.usage, b.limits, b.definition, b.by_exec(eid), b.by_exec_index], args)


@fn("ff_release_budget")
def release_budget(b: BudgetKeys, eid: str) -> Call:
    """KEYS buse, bex, bexi; ARGV budget_id, eid. Replies OK(`released` | `noop`)."""
    return Call("ff_release_budget", [b.usage, b.by_exec(eid), b.by_exec_index], [b.budget_id, eid])


@fn("ff_reconcile_budget_breach")
def reconcile_budget_breach(b: BudgetKeys, *, now_ms: int) -> Call:
    """Ours: set / clear `breached_at` on a lifetime budget's usage hash; prune an id with no definition."""
    return Call("ff_reconcile_budget_breach", [b.definition, b.limits, b.usage, b.policies_index],
                [now_ms, b.budget_id])


__all__ = ["reconcile_budget_breach", "record_spend", "release_budget"]
