"""Dramatiq with its Redis broker; each worker process runs Dramatiq's default 8 worker threads."""

from __future__ import annotations

import os
import signal
import threading

import dramatiq
from dramatiq.brokers.redis import RedisBroker

from benchmarks.recorder import mark, redis_url

broker = RedisBroker(url=redis_url(os.environ.get("BENCH_URL", "valkey://127.0.0.1:6379/0")))
dramatiq.set_broker(broker)


@dramatiq.actor(queue_name="bench", max_retries=0)
def noop(i: int) -> None:
    mark(i)


def worker(threads: int = 8) -> None:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    w = dramatiq.Worker(broker, worker_threads=threads)
    w.start()
    stop.wait()
    w.stop()
