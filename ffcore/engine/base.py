"""Scanner plumbing: a scanner visits every partition each tick, doing bounded work per partition."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from ffcore import events, metrics

from ..backend import Backend
from ..backoff import FATAL, TRANSPORT, Backoff
from . import status

log = logging.getLogger("ffcore.scanners")


@dataclass
class ScanStats:
    ticks: int = 0
    acted: int = 0
    errors: int = 0
    last_tick_ms: int = 0
    #: How far behind the oldest due item was at the last tick (scanner lag), ms.
    last_lag_ms: int = 0


@dataclass
class Scanner:
    """Subclasses implement `scan_partition`; `interval_ms` and `batch` bound the work."""

    backend: Backend
    interval_ms: int = 1000
    batch: int = 200
    name: str = "scanner"
    stats: ScanStats = field(default_factory=ScanStats)

    def scan_partition(self, n: int, now_ms: int) -> int:
        raise NotImplementedError

    def note_due(self, now_ms: int, due_scores: Sequence[float]) -> None:
        """Scanner lag: the age of the oldest item this tick found really due — one the scanner acted on, or
        failed to. Items the scanner rightly leaves parked (a revoked lease, a not-yet-due entry) never count."""
        if due_scores:
            self.stats.last_lag_ms = max(self.stats.last_lag_ms, now_ms - int(min(due_scores)))

    def tick(self) -> int:
        """One pass over every flow/execution partition; returns how many items were acted on."""
        now = self.backend.now_ms()
        acted = 0
        for n in range(self.backend.settings.partitions.flow):
            try:
                acted += self.scan_partition(n, now)
            except TRANSPORT:
                raise  # Valkey unreachable: the whole tick fails and the loop backs off (not one log per partition)
            except Exception:  # one bad partition must not stop the scanner
                self.stats.errors += 1
                log.exception("%s: partition %d failed", self.name, n)
        self.stats.ticks += 1
        self.stats.acted += acted
        self.stats.last_tick_ms = now
        return acted


def run_scanners(scanners: Sequence[Scanner], stop: threading.Event) -> None:
    """Run each scanner in its own thread until `stop` is set (SIGTERM/SIGINT in the caller). A failing tick
    is retried with backoff (ffcore.backoff); a configuration or library error stops them all and is raised."""

    fatal: list[BaseException] = []

    def loop(s: Scanner) -> None:
        backoff = Backoff()
        while not stop.is_set():
            started = time.monotonic()
            pause = 0.0
            try:
                acted = s.tick()
                metrics.inc(metrics.SCANNER_CYCLE, s.name)
                metrics.observe(metrics.SCANNER_CYCLE_SECONDS, time.monotonic() - started, s.name)
                if acted:
                    events.publish(s.backend, topics=["overview"])  # live pages: counts changed
                status.write(s.backend, s.name, lag_ms=s.stats.last_lag_ms, ticks=s.stats.ticks,
                             acted=s.stats.acted, errors=s.stats.errors)
                s.stats.last_lag_ms = 0
                backoff.reset()
            except FATAL as e:  # no retry fixes it: every scanner stops, and run_scanners raises it
                log.error("%s stops: %s: %s", s.name, type(e).__name__, e)
                fatal.append(e)
                stop.set()
                return
            except Exception as e:  # noqa: BLE001 - a scanner thread must outlive any one tick
                s.stats.errors += 1
                pause = backoff.failed(f"scanner {s.name}", e, log)
            remaining = s.interval_ms / 1000 - (time.monotonic() - started)
            stop.wait(max(0.0, remaining, pause))

    threads = [threading.Thread(target=loop, args=(s,), name=s.name, daemon=True) for s in scanners]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if fatal:
        raise fatal[0]
