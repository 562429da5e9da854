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
        replies = self.backend.call_many([F.mark_lease_expired_if_due(ExecKeys(eid.decode())) for eid, _ in due])
        # Due = a lease this pass expired (or failed to): a revoked lease, one already expired and waiting for a
        # worker to reclaim it, or one renewed meanwhile is rightly parked and is no lag.
        self.note_due(now_ms, [s for (_, s), r in zip(due, replies, strict=True)
                               if not isinstance(r, F.Reply) or r.status == "OK"])
        return sum(1 for r in replies if isinstance(r, F.Reply) and r.status == "OK")
