"""Attempt-timeout and execution-deadline scanners (ff_expire_execution)."""

from __future__ import annotations

from dataclasses import dataclass

from ffcore import functions as F
from ffcore import metrics

from ..keys import ExecKeys, PartitionKeys
from ..reads import core_refs_many
from .base import Scanner


@dataclass
class _ExpiryScanner(Scanner):
    reason: str = ""

    def index(self, ix: PartitionKeys) -> str:
        raise NotImplementedError

    def scan_partition(self, n: int, now_ms: int) -> int:
        due = self.backend.client.zrangebyscore(self.index(PartitionKeys(n)), "-inf", now_ms, start=0,
                                                num=self.batch, withscores=True)
        if not due:
            return 0
        eks = [ExecKeys(eid.decode()) for eid, _ in due]
        refs = core_refs_many(self.backend, eks)
        replies = self.backend.call_many([F.expire_execution(k, r, reason=self.reason) for k, r in zip(eks, refs,
                                                                                                   strict=True)])
        expired = [isinstance(r, F.Reply) and r.fields[:1] == ["expired"] for r in replies]
        # Due = expired by this pass (or the call failed); an entry whose execution already ended is no lag.
        self.note_due(now_ms, [s for (_, s), r, x in zip(due, replies, expired, strict=True)
                               if x or not isinstance(r, F.Reply)])
        if self.name == "attempt_timeout":
            for ref, x in zip(refs, expired, strict=True):
                if x:
                    metrics.inc(metrics.ATTEMPT_OUTCOME, ref.lane, "timeout")
        return sum(expired)


@dataclass
class AttemptTimeoutScanner(_ExpiryScanner):
    name: str = "attempt_timeout"
    reason: str = "attempt_timeout"

    def index(self, ix: PartitionKeys) -> str:
        return ix.attempt_timeout


@dataclass
class ExecutionDeadlineScanner(_ExpiryScanner):
    name: str = "execution_deadline"
    reason: str = "execution_deadline"

    def index(self, ix: PartitionKeys) -> str:
        return ix.execution_deadline
