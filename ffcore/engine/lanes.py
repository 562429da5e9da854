"""Which lanes exist: the global lane registry `ff:idx:lanes`, cached briefly for scanners."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ffcore import keys

from ..backend import Backend
from ..keys import LaneKeys, PartitionKeys
from ..reads import text
from .base import Scanner


class LaneCache:
    def __init__(self, backend: Backend, ttl_s: float = 5.0) -> None:
        self.backend = backend
        self.ttl_s = ttl_s
        self._lanes: list[str] = []
        self._at = 0.0

    def lanes(self) -> list[str]:
        if time.monotonic() - self._at > self.ttl_s:
            raw = self.backend.client.smembers(keys.LANES_INDEX)
            self._lanes = sorted(x.decode() if isinstance(x, bytes) else str(x) for x in raw)
            self._at = time.monotonic()
        return self._lanes


@dataclass
class LaneScanner(Scanner):
    """A scanner of per-lane indexes: the lanes from the (cached) registry, and the heads of one index."""

    lanes: LaneCache | None = field(default=None)

    def known_lanes(self) -> list[str]:
        if self.lanes is None:
            self.lanes = LaneCache(self.backend)
        return self.lanes.lanes()

    def heads(self, n: int, index: Callable[[LaneKeys], str],
              max_score: int | None = None) -> list[tuple[str, str]]:
        """`(lane, eid)` of up to `batch` first members of each lane's `index` on partition `n` (by rank,
        or those scored up to `max_score`), in one round trip."""
        lanes = self.known_lanes()
        if not lanes:
            return []
        ix = PartitionKeys(n)
        pipe = self.backend.client.pipeline(transaction=False)
        for lane in lanes:
            key = index(ix.lane(lane))
            if max_score is None:
                pipe.zrange(key, 0, self.batch - 1)
            else:
                pipe.zrangebyscore(key, "-inf", max_score, start=0, num=self.batch)
        return [(lane, text(e)) for lane, got in zip(lanes, pipe.execute(), strict=True) for e in got]
