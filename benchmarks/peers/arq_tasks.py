"""arq: `arq benchmarks.peers.arq_tasks.WorkerSettings` (its defaults: 500 ms poll, max_jobs 10) and
`arq benchmarks.peers.arq_tasks.FastPoll` (10 ms poll), two processes."""

from __future__ import annotations

import os
from typing import Any

from arq.connections import RedisSettings

from benchmarks.recorder import mark, redis_url


async def noop(ctx: dict[str, Any], i: int) -> None:
    mark(i)


class WorkerSettings:
    functions = [noop]
    redis_settings = RedisSettings.from_dsn(redis_url(os.environ["BENCH_URL"]))


class FastPoll:  # not a subclass: arq's CLI reads the class's own __dict__
    functions = [noop]
    redis_settings = WorkerSettings.redis_settings
    poll_delay = 0.01
