"""Celery: `celery -A benchmarks.peers.celery_tasks worker -c 2 -P prefork`, Valkey as the broker and
Celery's defaults otherwise: no result backend (Celery's default; the old harness configured one, which
made every delay() also SUBSCRIBE to the task's result channel), the default queue, gossip, mingle and
heartbeat on."""

from __future__ import annotations

import os

from celery import Celery

from benchmarks.recorder import mark, redis_url

app = Celery("bench", broker=redis_url(os.environ["BENCH_URL"]))


@app.task(name="bench.noop")
def noop(i: int) -> None:
    mark(i)
