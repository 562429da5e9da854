"""Which lanes exist: the global lane registry `ff:idx:lanes`, cached briefly for scanners."""

from __future__ import annotations

import time

from .. import keys
from ..backend import Backend


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
