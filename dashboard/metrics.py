"""This process's Prometheus metrics that more than the /metrics view records (kept apart from the HTTP
module so the backend can record into them without importing a view)."""

from __future__ import annotations

from prometheus_client import Histogram

#: FCALL latency by function, observed in this process (dashboard.backend installs the observer).
FCALL_SECONDS = Histogram("ff_fcall_seconds", "FCALL latency by function", ["function"],
                          buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0))


def observe_fcall(function: str, seconds: float) -> None:
    FCALL_SECONDS.labels(function).observe(seconds)
