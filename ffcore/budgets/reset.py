"""An operator's budget reset: zero the usage now and let the executions the budget held back run again.

One implementation for every door (dashboard form, REST route); it lives apart from `budgets` because it
re-checks blocked executions through the budget scanner's unblocking pass.
"""

from __future__ import annotations

from dataclasses import dataclass

from ffcore.backend import Backend
from ffcore.budgets import budgets
from ffcore.engine.budget_scanners import unblock_budget_waiters
from ffcore.errors import BudgetNotFound
from ffcore.ids import parse_budget_id


@dataclass(frozen=True)
class ResetOutcome:
    next_reset_at: int  #: ms; 0 = not recurring
    unblocked: int  #: executions that may run again


def reset_and_release(backend: Backend, budget_id: str) -> ResetOutcome:
    """Reset `budget_id` (BudgetNotFound when unknown: the library would create a stub) and unblock its
    waiters. Publishes the gauges' live event (budgets.reset_budget)."""
    bid = parse_budget_id(budget_id)
    if not budgets.read_budgets(backend, [bid]):
        raise BudgetNotFound("budget_not_found", [bid], "reset_budget")
    next_reset_at = budgets.reset_budget(backend, bid)
    unblocked = unblock_budget_waiters(backend, [budgets.budget_keys(backend, bid)])
    return ResetOutcome(next_reset_at, unblocked)
