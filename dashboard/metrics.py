"""This process's Prometheus metrics that more than the /metrics view records (kept apart from the HTTP
module so the backend can record into them without importing a view), the HTTP middleware feeding
`ff_http_requests_total` / `ff_http_request_duration_seconds`, and the collector that exports the counts every
process keeps in Valkey (ffcore.metrics)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

import redis
from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest, HttpResponse
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily
from prometheus_client.metrics_core import Metric

from ffcore import metrics as ffmetrics
from ffcore.backend import Backend

log = logging.getLogger("dashboard.metrics")

#: What a Valkey outage raises; /metrics and the middleware must answer through it (issue #41).
UNREACHABLE = (redis.RedisError, OSError)


#: The backend this process's counts are flushed into (set by dashboard.backend once it connected): requests
#: served before anything connected, or with no Valkey configured, never connect one just to count.
_flush_to: Backend | None = None


#: FCALL latency by function, counted with the other processes' (dashboard.backend installs it as the observer).
observe_fcall = ffmetrics.observe_fcall


def flush_into(backend: Backend | None) -> None:
    global _flush_to
    _flush_to = backend


class HttpMetricsMiddleware:
    """Counts every request by method, route pattern (not the raw path: ids would explode the series) and
    status. Counts reach Valkey at most once a second per process, never on a request's own round trip.
    Sync and async capable, so under ASGI it adds no thread hop of its own."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self._acall(request)
        started = time.monotonic()
        response = self.get_response(request)
        if self._count(request, response, started):
            _flush()
        return response

    async def _acall(self, request: HttpRequest) -> HttpResponse:
        started = time.monotonic()
        response = await self.get_response(request)
        if self._count(request, response, started):
            await asyncio.to_thread(_flush)  # a Valkey round trip must not block the event loop
        return response

    @staticmethod
    def _count(request: HttpRequest, response: HttpResponse, started: float) -> bool:
        """Count the request; whether a flush is due."""
        match = getattr(request, "resolver_match", None)
        path = "/" + match.route if match is not None and match.route else "unmatched"
        labels = (request.method or "", path, str(response.status_code))
        ffmetrics.inc(ffmetrics.HTTP_REQUESTS, *labels)
        ffmetrics.observe(ffmetrics.HTTP_SECONDS, time.monotonic() - started, *labels)
        return _flush_to is not None and ffmetrics.recorder.flush_due()


def _flush() -> None:
    backend = _flush_to
    try:
        if backend is not None:
            ffmetrics.recorder.flush(backend)
    except UNREACHABLE as e:  # counts of this second are dropped; the request is answered regardless
        log.debug("metrics flush failed: %s", e)


def collect_shared(backend: Backend) -> Iterator[Metric]:
    """The series every process counts into Valkey, as Prometheus families (raises UNREACHABLE)."""
    for s in ffmetrics.read_all(backend):
        fam = s.family
        if not fam.buckets:
            c = CounterMetricFamily(fam.name.removesuffix("_total"), fam.help, labels=list(fam.labels))
            for values, n in sorted(s.counts.items()):
                c.add_metric(list(values), n)
            yield c
        else:
            h = HistogramMetricFamily(fam.name, fam.help, labels=list(fam.labels))
            for values, (buckets, total) in sorted(s.hists.items()):
                h.add_metric(list(values), buckets, total)
            yield h
