"""The task body every system runs in S1 and S5: `mark(i)`, one RPUSH of "<i> <unix time>" to the marks
list on a second Valkey (BENCH_MARKS_URL, BENCH_KEY).

One RPUSH per task, the same call in every framework, synchronously: it works in every worker model
(threads, asyncio, prefork, and RQ's fork per job, whose child exits with os._exit and would lose a
buffer), and it is a realistic smallest task (one round trip). The marks live on their own server so that
neither the marks nor the harness's polling show in the measured server's CPU and command counts; the
worker processes do pay the RPUSH (≈ 30-40 µs of client CPU per task here, the same for everyone).
"""

from __future__ import annotations

import os
import threading
import time

import redis

_local = threading.local()


def redis_url(url: str) -> str:
    """Our valkey:// URL in the scheme the peers' clients accept."""
    return "redis://" + url.split("://", 1)[1]


def _client() -> redis.Redis:
    """One connection per thread and process (a forked child must not share its parent's socket)."""
    c = getattr(_local, "client", None)
    if c is None or _local.pid != os.getpid():
        c = _local.client = redis.Redis.from_url(redis_url(os.environ["BENCH_MARKS_URL"]))
        _local.pid = os.getpid()
    return c


def mark(i: object) -> None:
    """Record that task `i` started now."""
    _client().rpush(os.environ["BENCH_KEY"], f"{i} {time.time():.6f}")


def read_marks(client: redis.Redis, key: str) -> dict[int, float]:
    """First mark per task id."""
    out: dict[int, float] = {}
    for raw in client.lrange(key, 0, -1):
        i, t = raw.decode().split()
        out.setdefault(int(i), float(t))
    return out
