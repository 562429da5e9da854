"""Delayed promoter: moves due executions from each lane's delayed set to its eligible set."""

from __future__ import annotations

from dataclasses import dataclass

from ffcore import functions as F
from ffcore import wake

from ..keys import ExecKeys, PartitionKeys
from .lanes import LaneScanner


@dataclass
class DelayedPromoter(LaneScanner):
    name: str = "delayed_promoter"

    def scan_partition(self, n: int, now_ms: int) -> int:
        ix = PartitionKeys(n)
        due = self.heads(n, lambda lk: lk.delayed, max_score=now_ms)
        calls = [F.promote_delayed(ExecKeys(eid), ix.lane(lane), now_ms=now_ms) for lane, eid in due]
        call_lanes = [lane for lane, _ in due]
        replies = self.backend.call_many(calls)
        promoted = [lane for lane, r in zip(call_lanes, replies, strict=True)
                    if isinstance(r, F.Reply) and r.fields[:1] == ["promoted"]]
        wake.announce(self.backend, {lane: [n] for lane in set(promoted)})  # idle workers claim at once
        return len(promoted)
