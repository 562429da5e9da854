"""Claimed-task operations: budget usage reports (mixed into ClaimedTask), and the quota slot release
its terminal operations call."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

import redis

from ffcore.budgets import admission, budgets, spend
from ffcore.budgets.budgets import UsageResult

if TYPE_CHECKING:
    from ffcore.backend import Backend
    from ffcore.ids import ExecutionId

log = logging.getLogger("ffcore.worker.task")


class BudgetExceeded(RuntimeError):
    """A usage report would cross a budget's hard limit (nothing was applied)."""

    def __init__(self, budget_id: str, result: UsageResult) -> None:
        self.budget_id = budget_id
        self.result = result
        super().__init__(f"budget {budget_id}: {result.dimension} would exceed its hard limit "
                         f"({result.current} used of {result.limit})")


class UsageOps:
    """Methods here use the ClaimedTask attributes (backend, keys, fence, execution_id, attempt_index, ...)."""

    #: The quota policy whose admission this attempt holds ("" = none); set by the claimer.
    quota_policy_id: str = ""

    if TYPE_CHECKING:
        backend: Backend
        execution_id: ExecutionId
        attempt_index: int

    def report_usage(self, budget_id: str, deltas: Mapping[str, int], dedup_key: str | None = None, *,
                     raise_on_hard_breach: bool = False) -> UsageResult:
        """Add usage to a budget: `task.report_usage(budget_id, {"tokens": 120}, "step-3")`.

        Not lease-fenced (works after the lease is lost). A hard breach applies nothing; a soft breach
        applies and is advisory. A retried report with the same `dedup_key` applies once (24 h); the key is
        scoped to this execution and attempt, so pass a step name. `dedup_key=None` means no dedup.
        On a hard breach the worker contract is to stop and fail the attempt ("budget_exceeded");
        `raise_on_hard_breach=True` raises `BudgetExceeded` for that.
        """
        key = f"{self.execution_id}:{self.attempt_index}:{dedup_key}" if dedup_key else ""
        result = budgets.report_usage(self.backend, budget_id, deltas, key)
        if raise_on_hard_breach and result.hard_breach:
            raise BudgetExceeded(budget_id, result)
        return result

    def record_spend(self, budget_id: str, deltas: Mapping[str, int], idempotency_key: str = "", *,
                     raise_on_hard_breach: bool = False) -> UsageResult:
        """Spend attributed to this execution (operations §9.4): `task.record_spend(bid, {"usd_cents": 3}, "call-7")`.

        Usage rules as `report_usage`, and the deltas go to this execution's ledger on the budget, which is
        given back (`release_budget`) if the execution ends failed, cancelled, expired or skipped. The
        idempotency key is used as given (operations: the caller computes it), so one key applies once per
        budget partition for 24 h; "" means no dedup. Not lease-fenced.
        """
        result = spend.record_spend(self.backend, budget_id, self.execution_id, deltas, idempotency_key)
        if result.applied:
            self._spent_on = (*getattr(self, "_spent_on", ()), budget_id)
        if raise_on_hard_breach and result.hard_breach:
            raise BudgetExceeded(budget_id, result)
        return result

    def _release_spend(self) -> None:
        """After a terminal call: if this attempt recorded spend and the execution ended failed or cancelled
        (or expired / skipped), give that spend back at once (the budget reconciler releases any other
        ledger of it). Costs nothing for tasks that recorded no spend."""
        spent = tuple(dict.fromkeys(getattr(self, "_spent_on", ())))
        if not spent:
            return
        try:
            if spend.releasable(self.backend, [self.execution_id]) == [True]:
                spend.release_many(self.backend, [(b, self.execution_id) for b in spent])
        except redis.RedisError as e:
            log.warning("%s: releasing spend failed (the budget reconciler will): %s", self.execution_id, e)

    def _release_admission(self) -> None:
        self._release_spend()
        if not self.quota_policy_id:
            return
        try:
            admission.release(self.backend, self.quota_policy_id, self.execution_id)
        except redis.RedisError as e:  # the quota reconciler releases it for finished executions
            log.warning("%s: releasing quota admission failed: %s", self.execution_id, e)
