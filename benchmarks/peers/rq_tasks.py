"""RQ: the no-op job and a SimpleWorker process (no fork per job: RQ's fastest built-in worker)."""

from __future__ import annotations

from benchmarks.recorder import mark


def noop(i: int) -> None:
    mark(i)


def worker(url: str) -> None:
    from redis import Redis
    from rq import Queue, SimpleWorker

    r = Redis.from_url(url)
    SimpleWorker([Queue("bench", connection=r)], connection=r).work(logging_level="WARNING")
