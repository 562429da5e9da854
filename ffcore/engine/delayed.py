"""Delayed promoter: moves due executions from each lane's delayed set to its eligible set."""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import functions as F
from .. import wake
from ..keys import ExecKeys, PartitionKeys
from .base import Scanner
from .lanes import LaneCache


@dataclass
class DelayedPromoter(Scanner):
    name: str = "delayed_promoter"
    lanes: LaneCache | None = field(default=None)

    def scan_partition(self, n: int, now_ms: int) -> int:
        if self.lanes is None:
            self.lanes = LaneCache(self.backend)
        lanes = self.lanes.lanes()
        if not lanes:
            return 0
        ix = PartitionKeys(n)
        pipe = self.backend.client.pipeline(transaction=False)
        for lane in lanes:
            pipe.zrangebyscore(ix.lane(lane).delayed, "-inf", now_ms, start=0, num=self.batch)
        calls, call_lanes = [], []
        for lane, due in zip(lanes, pipe.execute(), strict=True):
            calls += [F.promote_delayed(ExecKeys(eid.decode()), ix.lane(lane), now_ms=now_ms) for eid in due]
            call_lanes += [lane] * len(due)
        replies = self.backend.call_many(calls)
        promoted = [lane for lane, r in zip(call_lanes, replies, strict=True)
                    if isinstance(r, F.Reply) and r.fields[:1] == ["promoted"]]
        wake.announce(self.backend, {lane: [n] for lane in set(promoted)})  # idle workers claim at once
        return len(promoted)
