"""Dramatiq: `dramatiq -p 2 -t 8 benchmarks.peers.dramatiq_tasks` (its CLI defaults here: 2 processes = the
cores, 8 threads); the Redis broker with its default middleware."""

from __future__ import annotations

import os

import dramatiq
from dramatiq.brokers.redis import RedisBroker

from benchmarks.recorder import mark, redis_url

dramatiq.set_broker(RedisBroker(url=redis_url(os.environ["BENCH_URL"])))


@dramatiq.actor
def noop(i: int) -> None:
    mark(i)
