"""Lease-expiry scanner: flags leases past their expiry as reclaimable (ff_mark_lease_expired_if_due)."""

from __future__ import annotations

from dataclasses import dataclass

from ffcore import functions as F

from ..keys import ExecKeys, PartitionKeys
from .base import Scanner


@dataclass
class LeaseExpiryScanner(Scanner):
    name: str = "lease_expiry"

    def scan_partition(self, n: int, now_ms: int) -> int:
        due = self.backend.client.zrangebyscore(PartitionKeys(n).lease_expiry, "-inf", now_ms, start=0,
                                                num=self.batch, withscores=True)
        if not due:
            return 0
        self.stats.last_lag_ms = max(self.stats.last_lag_ms, now_ms - int(due[0][1]))
        replies = self.backend.call_many([F.mark_lease_expired_if_due(ExecKeys(eid.decode())) for eid, _ in due])
        return sum(1 for r in replies if isinstance(r, F.Reply) and r.status == "OK")
