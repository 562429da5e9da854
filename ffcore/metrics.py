"""Counters and histograms of every process (worker, scanner, dashboard), kept in Valkey so one scrape of the
dashboard's `/metrics` shows the whole deployment (the series upstream's Grafana board reads).

A process counts into a local buffer (no I/O on the hot path); the buffer is drained into a pipeline the
process already sends (the worker's heartbeat, the scanner's status write) or, at most once per
`FLUSH_EVERY_S`, into one of its own. Each series family is one HASH (`keys.metrics_family`): a counter's field
is its label values; a histogram keeps one field per bucket (not cumulative), plus `sum` and `count`.
"""

from __future__ import annotations

import functools
import json
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from . import backend as backend_module
from . import keys
from .backend import Backend

#: Histogram bucket bounds (seconds). Claims and HTTP requests are ms-scale; a scanner cycle can take seconds.
FAST_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
CYCLE_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
FLUSH_EVERY_S = 1.0


@dataclass(frozen=True)
class Family:
    name: str  # as exported (counters end in _total, histograms in _seconds)
    help: str
    labels: tuple[str, ...]
    buckets: tuple[float, ...] = ()  # empty: a counter


ATTEMPT_OUTCOME = Family("ff_attempt_outcome_total", "Attempts ended, by lane and outcome "
                         "(ok, error, timeout, cancelled, retry)", ("lane", "outcome"))
SCANNER_CYCLE = Family("ff_scanner_cycle_total", "Scanner cycles run", ("scanner",))
SCANNER_CYCLE_SECONDS = Family("ff_scanner_cycle_duration_seconds", "Scanner cycle duration", ("scanner",),
                               CYCLE_BUCKETS)
CLAIM_SECONDS = Family("ff_claim_from_grant_duration_seconds",
                       "Claim latency: from asking for work to holding the lease, per claimed lane", ("lane",),
                       FAST_BUCKETS)
LEASE_RENEWAL = Family("ff_lease_renewal_total", "Lease renewals by outcome (ok, error)", ("outcome",))
WORKER_AT_CAPACITY = Family("ff_worker_at_capacity_total", "Work offered to a worker that had no free slot", ())
QUOTA_HIT = Family("ff_quota_hit_total", "Executions held back by a quota (rate, concurrency)", ("reason",))
BUDGET_HIT = Family("ff_budget_hit_total", "Executions held back by a budget at its hard limit, by dimension",
                    ("dimension",))
FCALL_SECONDS = Family("ff_fcall_seconds", "FCALL latency by function (single calls; batched ones are not timed "
                       "one by one)", ("function",),
                       (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0))
HTTP_REQUESTS = Family("ff_http_requests_total", "HTTP requests answered by the dashboard/API",
                       ("method", "path", "status"))
HTTP_SECONDS = Family("ff_http_request_duration_seconds", "HTTP request duration", ("method", "path", "status"),
                      FAST_BUCKETS)
COMPLETIONS_GONE = Family("ff_completions_execution_gone_total",
                          "Completions (complete or fail of a running attempt) that found their execution gone: "
                          "lost with a primary inside its replication lag, or deleted meanwhile", ("function",))

FAMILIES = (ATTEMPT_OUTCOME, SCANNER_CYCLE, SCANNER_CYCLE_SECONDS, CLAIM_SECONDS, LEASE_RENEWAL,
            WORKER_AT_CAPACITY, QUOTA_HIT, BUDGET_HIT, HTTP_REQUESTS, HTTP_SECONDS, FCALL_SECONDS, COMPLETIONS_GONE)


@functools.lru_cache(maxsize=4096)  # label sets are few; a worker counts the same ones per task
def _field(values: Sequence[str]) -> str:
    return json.dumps(list(values), separators=(",", ":"))


class Recorder:
    """This process's unflushed counts (thread-safe; recording never touches Valkey)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ints: dict[tuple[str, str], int] = {}
        self._sums: dict[tuple[str, str], float] = {}
        self._flushed_at = time.monotonic()

    def inc(self, fam: Family, *labels: str, n: int = 1) -> None:
        k = (fam.name, _field(labels))
        with self._lock:
            self._ints[k] = self._ints.get(k, 0) + n

    def observe(self, fam: Family, seconds: float, *labels: str) -> None:
        base = _field(labels)
        bucket = next((f"{b:g}" for b in fam.buckets if seconds <= b), "+Inf")
        with self._lock:
            for k in ((fam.name, f"{base}|{bucket}"), (fam.name, f"{base}|count")):
                self._ints[k] = self._ints.get(k, 0) + 1
            s = (fam.name, f"{base}|sum")
            self._sums[s] = self._sums.get(s, 0.0) + seconds

    def drain_into(self, pipe: Any) -> None:
        """Queue everything counted so far on `pipe` (which the caller executes) and forget it here."""
        with self._lock:
            ints, sums, self._ints, self._sums = self._ints, self._sums, {}, {}
            self._flushed_at = time.monotonic()
        for (name, f), n in ints.items():
            pipe.hincrby(keys.metrics_family(name), f, n)
        for (name, f), x in sums.items():
            pipe.hincrbyfloat(keys.metrics_family(name), f, x)

    def flush(self, backend: Backend) -> None:
        """Send the counts now (one pipeline). On a failure they are lost: counters may undercount during an
        outage, which Prometheus' rate() tolerates; they never block or grow without bound."""
        if not (self._ints or self._sums):
            return
        pipe = backend.client.pipeline(transaction=False)
        self.drain_into(pipe)
        pipe.execute()

    def flush_due(self) -> bool:
        """Whether the last flush is older than FLUSH_EVERY_S (for processes without a periodic write)."""
        return time.monotonic() - self._flushed_at >= FLUSH_EVERY_S


#: The process-wide recorder.
recorder = Recorder()
inc = recorder.inc
observe = recorder.observe


def _count_gone(function: str, n: int) -> None:
    recorder.inc(COMPLETIONS_GONE, function, n=n)


backend_module.GONE_LISTENERS.append(_count_gone)


def observe_fcall(function: str, seconds: float) -> None:
    """A `Backend.observer`: every process that installs it (dashboard, ffworker, ffscanners) adds its FCALLs."""
    recorder.observe(FCALL_SECONDS, seconds, function)


@dataclass
class Series:
    family: Family
    #: counter: label values -> count; histogram: label values -> (cumulative [(le, count)], sum).
    counts: dict[tuple[str, ...], float]
    hists: dict[tuple[str, ...], tuple[list[tuple[str, float]], float]]


def read_all(backend: Backend) -> list[Series]:
    """Every family's totals across all processes (one round trip)."""
    pipe = backend.client.pipeline(transaction=False)
    for fam in FAMILIES:
        pipe.hgetall(keys.metrics_family(fam.name))
    out = []
    for fam, raw in zip(FAMILIES, pipe.execute(), strict=True):
        fields = {(k.decode() if isinstance(k, bytes) else k): float(v) for k, v in raw.items()}
        out.append(_series(fam, fields))
    return out


def _series(fam: Family, fields: dict[str, float]) -> Series:
    s = Series(fam, {}, {})
    if not fam.buckets:
        for f, v in fields.items():
            s.counts[tuple(json.loads(f))] = v
        return s
    per: dict[str, dict[str, float]] = {}
    for f, v in fields.items():
        base, _, part = f.rpartition("|")
        per.setdefault(base, {})[part] = v
    for base, parts in per.items():
        running, cum = 0.0, []
        for b in [f"{b:g}" for b in fam.buckets] + ["+Inf"]:
            running += parts.get(b, 0.0)
            cum.append((b, running))
        s.hists[tuple(json.loads(base))] = (cum, parts.get("sum", 0.0))
    return s
