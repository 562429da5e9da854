"""/healthz (never needs auth) and /metrics (Prometheus text format)."""

from __future__ import annotations

import time

import redis
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET
from prometheus_client import CollectorRegistry, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from ffcore.execution import listing
from ffcore.execution.client import Client
from ffcore.worker.heartbeat import list_workers

from ..backend import get_backend
from ..metrics import FCALL_SECONDS  # noqa: F401 - registered with the default registry /metrics reads
from .access import Denied, authorize


@require_GET
def healthz(request: HttpRequest) -> HttpResponse:
    try:
        get_backend().client.ping()
    except (redis.ConnectionError, redis.TimeoutError) as e:
        return JsonResponse({"status": "unavailable", "error": str(e)}, status=503)
    return JsonResponse({"status": "ok"})


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    try:
        authorize(request)
    except Denied as e:
        return JsonResponse({"error": str(e)}, status=e.status)
    backend = get_backend()
    reg = CollectorRegistry()
    by_state = Gauge("ff_executions", "Executions by lane and index state", ["lane", "state"], registry=reg)
    lanes = Client(backend).lanes()
    for lane, counts in listing.count_by_lane_state(backend, lanes).items():
        for state, n in counts.items():
            by_state.labels(lane, state).set(n)
    workers = Gauge("ff_live_workers", "Workers with a live heartbeat", registry=reg)
    workers.set(len(list_workers(backend)))
    lag = Gauge("ff_scanner_lag_ms", "How far behind its oldest due item each scanner was", ["scanner"],
                registry=reg)
    for name, ms in _scanner_lags(backend).items():
        lag.labels(name).set(ms)
    up = Gauge("ff_metrics_generated_at_seconds", "When this page was generated", registry=reg)
    up.set(time.time())
    body = generate_latest(reg) + generate_latest()  # per-request gauges + this process's FCALL histograms
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)


def _scanner_lags(backend: object) -> dict[str, int]:
    from ffcore.engine.status import read_lags

    return read_lags(backend)  # type: ignore[arg-type]
