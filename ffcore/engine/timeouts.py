"""Attempt-timeout and execution-deadline scanners (ff_expire_execution)."""

from __future__ import annotations

from dataclasses import dataclass

from ffcore import functions as F

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
        self.stats.last_lag_ms = max(self.stats.last_lag_ms, now_ms - int(due[0][1]))
        eks = [ExecKeys(eid.decode()) for eid, _ in due]
        refs = core_refs_many(self.backend, eks)
        replies = self.backend.call_many([F.expire_execution(k, r, reason=self.reason) for k, r in zip(eks, refs,
                                                                                                   strict=True)])
        return sum(1 for r in replies if isinstance(r, F.Reply) and r.fields[:1] == ["expired"])


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
