"""Schedule scanner: fires due recurring schedules (ffcore.schedules), exactly once per fire time.

It visits only the partitions that hold schedules (`ff:idx:schedule_partitions`) and, there, the due
index `ff:idx:{fp:N}:schedules_due`. Each fire is a compare-and-set FCALL, so any number of `ffscanners`
processes may run it at once: one wins each fire time, the others see it moved.
"""

from __future__ import annotations

from dataclasses import dataclass

from ffcore import keys
from ffcore.backend import Backend
from ffcore.execution.client import Client
from ffcore.reads import text

from .base import Scanner


@dataclass
class ScheduleScanner(Scanner):
    name: str = "schedules"

    def tick(self, now_ms: int | None = None) -> int:
        """One pass; `now_ms` (default: the Valkey clock) is the time fire times are due against."""
        now = self.backend.now_ms() if now_ms is None else now_ms
        parts = sorted(int(text(x)) for x in self.backend.client.smembers(keys.SCHEDULE_PARTITIONS))
        schedules = Client(self.backend).schedules
        acted = 0
        for n in parts:
            oldest = self.backend.client.zrange(keys.schedules_due(n), 0, 0, withscores=True)
            if oldest and oldest[0][1] <= now:
                self.stats.last_lag_ms = max(self.stats.last_lag_ms, now - int(oldest[0][1]))
                acted += schedules.fire_due(n, now, self.batch)
        self.stats.ticks += 1
        self.stats.acted += acted
        self.stats.last_tick_ms = now
        return acted

    def scan_partition(self, n: int, now_ms: int) -> int:
        return Client(self.backend).schedules.fire_due(n, now_ms, self.batch)


#: How often due schedules are looked for: fire times are met within about this much.
INTERVAL_MS = 200


def scanners(backend: Backend) -> list[Scanner]:
    return [ScheduleScanner(backend, interval_ms=INTERVAL_MS, batch=backend.settings.scanners.batch)]
