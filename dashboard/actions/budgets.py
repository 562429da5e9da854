"""Operator actions: budgets and quotas (audited, like dashboard.actions)."""

from __future__ import annotations

from ffcore.backend import Backend
from ffcore.budgets.reset import reset_and_release

from . import ActionResult, run_action


def reset_budget(backend: Backend, actor: str, budget_id: str, reason: str) -> ActionResult:
    """Zero the budget's usage and let the executions it held back run again (ffcore.budgets.reset)."""
    unblocked: list[int] = []

    def run() -> str:
        unblocked.append(reset_and_release(backend, budget_id).unblocked)
        if unblocked[0]:
            return f"Budget reset; {unblocked[0]} blocked execution(s) may run again."
        return "Budget reset."

    return run_action(backend, actor, "reset_budget", f"budget:{budget_id}", reason, run,
                      detail=lambda: f"unblocked={unblocked[0]}")
