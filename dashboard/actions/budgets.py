"""Operator actions: budgets and quotas (audited, like dashboard.actions)."""

from __future__ import annotations

from ffcore import budgets
from ffcore.backend import Backend
from ffcore.engine.budget_scanners import unblock_budget_waiters
from ffcore.errors import InvalidId

from . import ActionResult, _run


class _Reset:
    """Reset now, then re-check the executions the budget was holding back (they run at once)."""

    def __init__(self, backend: Backend, budget_id: str) -> None:
        self.backend, self.budget_id = backend, budget_id
        self.status = "OK"
        self.fields: list[str] = []
        self.unblocked = 0

    def __call__(self) -> _Reset:
        if budgets.get_budget(self.backend, self.budget_id, with_burn=False) is None:
            # ff_reset_budget has no existence check: it would create a stub budget.
            raise InvalidId(f"no budget has the id {self.budget_id!r}")
        budgets.reset_budget(self.backend, self.budget_id)
        self.unblocked = unblock_budget_waiters(self.backend, [budgets.budget_keys(self.backend, self.budget_id)])
        return self


def reset_budget(backend: Backend, actor: str, budget_id: str, reason: str) -> ActionResult:
    op = _Reset(backend, budget_id)
    result = _run(backend, actor, "reset_budget", f"budget:{budget_id}", reason, op, "Budget reset.")
    if result.ok and op.unblocked:
        return ActionResult(True, f"Budget reset; {op.unblocked} blocked execution(s) may run again.", result.code)
    return result
