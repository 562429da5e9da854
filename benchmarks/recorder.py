"""Marks taken inside worker processes (ours and the peers'): `mark(i)` appends "<i> <unix time>" to a
process-local buffer that a daemon thread flushes to one Valkey list every 20 ms.

The same cheap mark is used by every framework, so no framework pays a round trip per task for being
measured. The list and URL come from the environment (BENCH_URL, BENCH_KEY) because the peers' worker
processes are started by the peers' own machinery.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time

import redis

FLUSH_S = 0.02


def redis_url(url: str) -> str:
    """Our valkey:// URL in the scheme the peers' clients accept."""
    return "redis://" + url.split("://", 1)[1]


class Recorder:
    def __init__(self, url: str, key: str) -> None:
        self.client = redis.Redis.from_url(redis_url(url))
        self.key = key
        self.buf: list[str] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._run, name="bench-recorder", daemon=True).start()

    def mark(self, i: object) -> None:
        self.buf.append(f"{i} {time.time():.6f}")  # list.append is atomic under the GIL

    def flush(self) -> None:
        with self.lock:
            buf, self.buf = self.buf, []
        if buf:
            self.client.rpush(self.key, *buf)

    def _run(self) -> None:
        while True:
            time.sleep(FLUSH_S)
            with contextlib.suppress(redis.RedisError):
                self.flush()


_rec: Recorder | None = None
_rec_pid = 0
_rec_lock = threading.Lock()


def mark(i: object) -> None:
    """Record that task `i` ran now (per process; safe after fork)."""
    global _rec, _rec_pid
    if _rec is None or _rec_pid != os.getpid():
        with _rec_lock:
            if _rec is None or _rec_pid != os.getpid():
                _rec = Recorder(os.environ["BENCH_URL"], os.environ["BENCH_KEY"])
                _rec_pid = os.getpid()
    _rec.mark(i)


def read_marks(client: redis.Redis, key: str) -> dict[int, float]:
    """First mark per task id."""
    out: dict[int, float] = {}
    for raw in client.lrange(key, 0, -1):
        i, t = raw.decode().split()
        out.setdefault(int(i), float(t))
    return out
