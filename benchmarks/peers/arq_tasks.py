"""arq with a 10 ms poll (its default is 500 ms) and 16 concurrent jobs per worker process."""

from __future__ import annotations

import os
from typing import Any

from benchmarks.recorder import mark, redis_url


async def noop(ctx: dict[str, Any], i: int) -> None:
    mark(i)


def settings() -> type:
    from arq.connections import RedisSettings

    class WorkerSettings:
        functions = [noop]
        redis_settings = RedisSettings.from_dsn(redis_url(os.environ["BENCH_URL"]))
        poll_delay = 0.01
        max_jobs = 16

    return WorkerSettings


def worker() -> None:
    from arq.worker import run_worker

    run_worker(settings())
