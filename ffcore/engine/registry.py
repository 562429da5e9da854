"""The set of scanners a `ffscanners` process runs, built from settings."""

from __future__ import annotations

import signal
import threading

from ..backend import Backend
from . import budget_scanners, flow_scanners, schedule_scanner, stream_scanners, suspension_scanners
from .base import Scanner, run_scanners
from .delayed import DelayedPromoter
from .index_reconciler import IndexReconciler
from .lease_expiry import LeaseExpiryScanner
from .stats import StatsSampler
from .timeouts import AttemptTimeoutScanner, ExecutionDeadlineScanner
from .worker_index import WorkerIndexPruner


def build_scanners(backend: Backend) -> list[Scanner]:
    s = backend.settings.scanners
    return [
        LeaseExpiryScanner(backend, interval_ms=s.lease_expiry_interval_ms, batch=s.batch),
        DelayedPromoter(backend, interval_ms=s.delayed_promoter_interval_ms, batch=s.batch),
        AttemptTimeoutScanner(backend, interval_ms=s.attempt_timeout_interval_ms, batch=s.batch),
        ExecutionDeadlineScanner(backend, interval_ms=s.execution_deadline_interval_ms, batch=s.batch),
        IndexReconciler(backend, interval_ms=s.index_reconciler_interval_ms, batch=s.batch),
        *suspension_scanners.scanners(backend),
        *flow_scanners.scanners(backend),
        *budget_scanners.scanners(backend),
        *stream_scanners.scanners(backend),
        *schedule_scanner.scanners(backend),
        StatsSampler(backend),  # the overview charts (issue #25)
        WorkerIndexPruner(backend),
    ]


def serve(backend: Backend) -> None:
    """Run every scanner until SIGTERM/SIGINT."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    run_scanners(build_scanners(backend), stop)
