"""/healthz (never needs auth) and /metrics (Prometheus text format)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import redis
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET
from prometheus_client import CollectorRegistry, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.metrics_core import Metric

from ffcore import metrics as ffmetrics
from ffcore.backend import Backend
from ffcore.engine.status import read_lags
from ffcore.execution import listing
from ffcore.execution.client import Client
from ffcore.flows.cancel import backlog_depth
from ffcore.workers import list_workers

from ..backend import get_backend
from ..metrics import UNREACHABLE, collect_shared
from .access import Denied, authorize

log = logging.getLogger("dashboard.metrics")


@require_GET
def healthz(request: HttpRequest) -> HttpResponse:
    try:
        get_backend().client.ping()
    except (redis.ConnectionError, redis.TimeoutError) as e:
        return JsonResponse({"status": "unavailable", "error": str(e)}, status=503)
    return JsonResponse({"status": "ok"})


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    """Prometheus text: the deployment's counters (every process counts into Valkey, ffcore.metrics), gauges
    read now, and the answering process's own collectors (CPU, memory, GC). Answers 200 with what it can when
    Valkey is unreachable (`ff_valkey_up 0`): a scrape during a failover must not fail as a whole (issue #41)."""
    try:
        authorize(request)
    except Denied as e:
        return JsonResponse({"error": str(e)}, status=e.status)
    backend = get_backend()
    reg = CollectorRegistry()
    up = Gauge("ff_valkey_up", "1 when this scrape could read Valkey, 0 when it answered without it", registry=reg)
    parts: list[bytes] = []
    try:
        ffmetrics.recorder.flush(backend)  # this process's own counts, so the scrape includes them
        _gauges(backend, reg)
        shared = CollectorRegistry()
        shared.register(_Shared(list(collect_shared(backend))))
        parts.append(generate_latest(shared))
        up.set(1)
    except UNREACHABLE as e:
        log.warning("/metrics without Valkey: %s: %s", type(e).__name__, e)
        up.set(0)
    Gauge("ff_metrics_generated_at_seconds", "When this page was generated", registry=reg).set(time.time())
    body = generate_latest(reg) + b"".join(parts) + generate_latest()  # + this process's own (CPU, memory, GC)
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)


class _Shared:
    """A collector over families already read (so a read failure happens before anything is rendered)."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self.families)


def _gauges(backend: Backend, reg: CollectorRegistry) -> None:
    by_state = Gauge("ff_executions", "Executions by lane and index state", ["lane", "state"], registry=reg)
    lanes = Client(backend).lanes()
    for lane, counts in listing.count_by_lane_state(backend, lanes).items():
        for state, n in counts.items():
            by_state.labels(lane, state).set(n)
    Gauge("ff_live_workers", "Workers with a live heartbeat", registry=reg).set(len(list_workers(backend)))
    lag = Gauge("ff_scanner_lag_ms", "How long the oldest item that was really due waited for its scanner "
                "(rightly parked items never count)", ["scanner"], registry=reg)
    for name, ms in read_lags(backend).items():
        lag.labels(name).set(ms)
    Gauge("ff_cancel_backlog_depth", "Member cancels of cancelled flows not yet acknowledged",
          registry=reg).set(backlog_depth(backend))
