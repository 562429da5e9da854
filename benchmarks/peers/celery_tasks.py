"""Celery with Valkey as broker and result backend; one worker with a prefork pool of N processes."""

from __future__ import annotations

import os

from celery import Celery

from benchmarks.recorder import mark, redis_url

_url = redis_url(os.environ.get("BENCH_URL", "valkey://127.0.0.1:6379/0"))
app = Celery("bench", broker=_url, backend=_url)
app.conf.update(task_default_queue="bench", worker_hijack_root_logger=False,
                broker_connection_retry_on_startup=True)


@app.task(name="bench.noop")
def noop(i: int) -> None:
    mark(i)


def worker(processes: int) -> None:
    app.worker_main(["worker", "--pool=prefork", f"--concurrency={processes}", "--loglevel=WARNING", "-Q", "bench",
                     "--without-gossip", "--without-mingle", "--without-heartbeat"])
