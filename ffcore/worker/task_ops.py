"""What every part of a claimed task agrees on (the errors a task raises, the reply codes that mean its lease is
gone), and two of ClaimedTask's mixins: attempt stream frames and budget usage reports (with the quota slot
release its terminal operations call). The suspend mixin is ffcore.worker.task_suspend."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import redis

from ffcore import functions as F
from ffcore.budgets import admission, budgets, spend
from ffcore.budgets.budgets import UsageResult
from ffcore.errors import ScriptError
from ffcore.functions.stream import DEFAULT_MAX_PAYLOAD_BYTES, DEFAULT_RETENTION_MAXLEN
from ffcore.policy import stream_retention_maxlen

if TYPE_CHECKING:
    from ffcore.backend import Backend
    from ffcore.ids import ExecutionId
    from ffcore.keys import ExecKeys

#: Codes that mean "this lease is no longer ours" (any task operation, suspend included).
LEASE_GONE = frozenset({"stale_lease", "lease_expired", "lease_revoked", "execution_not_active",
                        "execution_not_found", "stale_owner_cannot_append", "stream_closed",
                        "invalid_lease_for_suspend"})
#: Errors after which a call may or may not have been applied.
TRANSPORT = (redis.ConnectionError, redis.TimeoutError)


class TaskConsumed(RuntimeError):
    """A terminal operation was already called on this task."""


class LeaseLost(RuntimeError):
    """The lease is gone (expired, revoked, cancelled or taken over); stop working on this attempt."""


# ------------------------------------------------------------------ attempt stream frames
@dataclass(frozen=True)
class AppendFrameOutcome:
    """`stream_id` is the new entry's id; `frame_count` counts every append of the attempt (not the kept ones)."""

    stream_id: str
    frame_count: int


class StreamOps:
    """Methods here use the ClaimedTask attributes (backend, keys, fence, execution_id, attempt_index, ...)."""

    if TYPE_CHECKING:
        backend: Backend
        policy: dict[str, Any]

        @property
        def keys(self) -> ExecKeys: ...

        @property
        def fence(self) -> F.Fence: ...

        def _check(self, reply_error: ScriptError) -> None: ...

    def append_frame(self, frame_type: str, payload: bytes | str = b"", metadata: str | None = None, *,
                     encoding: str = "utf8", source: str = "worker", correlation_id: str | None = None,
                     metadata_json: str | None = None,
                     max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES) -> AppendFrameOutcome:
        """Append one frame to this attempt's output stream (worker-sdk §3.5, AppendFrameArgs).

        `encoding` (default "utf8") and `source` (default "worker") are stored on the frame. Its correlation id
        is `correlation_id` (or `metadata`, the positional name upstream's v0.2.0 SDK sent in that slot; giving
        both differently raises); `metadata_json` (checked to be JSON) is stored in a field of its own, so both
        can be given. Payloads over `max_payload_bytes` (default 64 KiB) raise `retention_limit_exceeded`; a
        lost lease raises `stale_owner_cannot_append` or `stream_closed` (and marks the task's lease lost).
        """
        if not frame_type:
            raise ValueError("frame_type must not be empty")
        for name, value in (("encoding", encoding), ("source", source)):
            if not value or len(value) > 64 or any(ord(ch) < 0x21 for ch in value):
                raise ValueError(f"{name} must be 1..64 printable characters without spaces")
        if metadata and correlation_id and metadata != correlation_id:
            raise ValueError("metadata and correlation_id are the same field (the frame's correlation id): give one")
        if isinstance(max_payload_bytes, bool) or not isinstance(max_payload_bytes, int) \
                or not 0 <= max_payload_bytes <= 2**32 - 1:
            raise ValueError("max_payload_bytes must be an integer 0..4294967295")
        if metadata_json:
            try:
                json.loads(metadata_json)
            except ValueError:
                raise ValueError("metadata_json is not valid JSON") from None
        data = payload.encode() if isinstance(payload, str) else payload
        try:
            reply = self.backend.call(F.append_frame(self.keys, self.fence, frame_type=frame_type, payload=data,
                                                     ts=int(time.time() * 1000), encoding=encoding, source=source,
                                                     correlation_id=correlation_id or metadata or "",
                                                     retention_maxlen=self._retention_maxlen(),
                                                     max_payload_bytes=max_payload_bytes,
                                                     metadata_json=metadata_json or ""))
        except ScriptError as e:
            if e.code != "retention_limit_exceeded":
                self._check(e)
            raise
        return AppendFrameOutcome(reply[0], int(reply[1]))

    def _retention_maxlen(self) -> int:
        """The policy's stream_policy.retention_maxlen, else the library default."""
        return stream_retention_maxlen(self.policy) or DEFAULT_RETENTION_MAXLEN

    async def aappend_frame(self, frame_type: str, payload: bytes | str = b"", metadata: str | None = None,
                            **kw: Any) -> AppendFrameOutcome:
        return await asyncio.to_thread(functools.partial(self.append_frame, frame_type, payload, metadata, **kw))


# ------------------------------------------------------------------ budget usage
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
