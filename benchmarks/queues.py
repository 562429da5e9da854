"""S1 and S5 for FlowFabric and the four peers, one harness: same Valkey, same number of worker
processes, a no-op task that only marks its start (benchmarks.recorder).

S1: workers running, N tasks submitted as fast as the system's client allows (its batch API where it has
one), end-to-end tasks/s = N / (last task ran - first submit), and submit->ran latency p50/p95.
S5: one task every 10 ms (100 tasks/s offered), pick-up latency submit->handler start p50/p95.
Submit time = client clock just before the call that carried the task (batched calls: before the batch).
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import redis

from benchmarks.common import percentile, progress
from benchmarks.recorder import read_marks, redis_url

MARKS = "bench:marks"


# ---------------------------------------------------------------- worker process bodies (spawned)
def _ours_worker(url: str, concurrency: int) -> None:
    from benchmarks.recorder import mark
    from ffcore.backend import Backend
    from ffcore.settings import Settings
    from ffcore.task import ClaimedTask
    from ffcore.worker import Registry, Worker, WorkerConfig

    reg = Registry()

    @reg.handler("bench")
    def noop(task: ClaimedTask) -> None:
        mark(int(task.payload))

    Worker(Backend.connect(Settings.from_url(url)), WorkerConfig(lanes=("bench",), worker_id="bench",
                                                                 concurrency=concurrency), reg).run()


def _rq_worker(url: str) -> None:
    from benchmarks.peers import rq_tasks

    rq_tasks.worker(redis_url(url))


def _celery_worker(processes: int) -> None:
    from benchmarks.peers import celery_tasks

    celery_tasks.worker(processes)


def _dramatiq_worker() -> None:
    from benchmarks.peers import dramatiq_tasks

    dramatiq_tasks.worker()


def _arq_worker() -> None:
    from benchmarks.peers import arq_tasks

    arq_tasks.worker()


# ---------------------------------------------------------------- systems
@dataclass
class System:
    name: str
    note: str
    #: url, processes -> started processes
    start: Callable[[str, int], list[Any]]
    #: url -> submit(ids) function (one call; a batch where the client has a batch API)
    submitter: Callable[[str], Callable[[list[int]], None]]
    batch: int = 1
    closers: list[Callable[[], None]] = field(default_factory=list)


def _spawn(target: Callable[..., None], args: tuple[Any, ...], n: int) -> list[Any]:
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=target, args=args, daemon=False) for _ in range(n)]
    for p in procs:
        p.start()
    return procs


def _ours_submitter(url: str) -> Callable[[list[int]], None]:
    from ffcore.backend import Backend
    from ffcore.client import Client
    from ffcore.settings import Settings

    client = Client(Backend.connect(Settings.from_url(url)))

    def submit(ids: list[int]) -> None:
        client.create_many([{"kind": "bench", "lane": "bench", "payload": str(i)} for i in ids])

    return submit


def _rq_submitter(url: str) -> Callable[[list[int]], None]:
    from rq import Queue

    from benchmarks.peers.rq_tasks import noop

    q = Queue("bench", connection=redis.Redis.from_url(redis_url(url)))

    def submit(ids: list[int]) -> None:
        if len(ids) == 1:
            q.enqueue(noop, ids[0])
        else:
            q.enqueue_many([Queue.prepare_data(noop, args=(i,)) for i in ids])

    return submit


def _celery_submitter(url: str) -> Callable[[list[int]], None]:
    from benchmarks.peers.celery_tasks import noop

    def submit(ids: list[int]) -> None:
        for i in ids:
            noop.delay(i)

    return submit


def _dramatiq_submitter(url: str) -> Callable[[list[int]], None]:
    from benchmarks.peers.dramatiq_tasks import noop

    def submit(ids: list[int]) -> None:
        for i in ids:
            noop.send(i)

    return submit


def _arq_submitter(url: str) -> Callable[[list[int]], None]:
    from arq import create_pool

    from benchmarks.peers.arq_tasks import settings

    loop = asyncio.new_event_loop()
    pool = loop.run_until_complete(create_pool(settings().redis_settings))

    async def enqueue(ids: list[int]) -> None:
        await asyncio.gather(*(pool.enqueue_job("noop", i) for i in ids))

    def submit(ids: list[int]) -> None:
        loop.run_until_complete(enqueue(ids))

    return submit


def systems(concurrency: int) -> list[System]:
    return [
        System("FlowFabric (ours)", f"{concurrency} handler threads per process; create_many batches of 100",
               lambda url, n: _spawn(_ours_worker, (url, concurrency), n), _ours_submitter, batch=100),
        System("RQ", "SimpleWorker per process; enqueue_many batches of 100",
               lambda url, n: _spawn(_rq_worker, (url,), n), _rq_submitter, batch=100),
        System("Celery", "one worker, prefork pool of N processes; Valkey broker + result backend; delay() per task",
               lambda url, n: _spawn(_celery_worker, (n,), 1), _celery_submitter),
        System("Dramatiq", "Redis broker, 8 worker threads per process; send() per task",
               lambda url, n: _spawn(_dramatiq_worker, (), n), _dramatiq_submitter),
        System("arq", "10 ms poll, max_jobs 16 per process; enqueue_job gathered in batches of 100",
               lambda url, n: _spawn(_arq_worker, (), n), _arq_submitter, batch=100),
    ]


def available(name: str) -> str | None:
    """None if the peer's package imports, else the reason."""
    mod = {"RQ": "rq", "Celery": "celery", "Dramatiq": "dramatiq", "arq": "arq"}.get(name)
    if mod is None:
        return None
    try:
        __import__(mod)
    except Exception as e:  # noqa: BLE001 - report any import failure
        return f"{mod} not importable ({e.__class__.__name__}: {e}); pip install -e '.[bench]'"
    return None


# ---------------------------------------------------------------- runs
def _wait_marks(r: redis.Redis, want: int, timeout_s: float, label: str) -> bool:
    deadline, last, last_change = time.monotonic() + timeout_s, -1, time.monotonic()
    while True:
        got = int(r.llen(MARKS))
        if got >= want:
            progress(f"{label}: {got}/{want} ran")
            return True
        if got != last:
            last, last_change = got, time.monotonic()
            progress(f"{label}: {got}/{want} ran")
        if time.monotonic() > deadline or time.monotonic() - last_change > 60:
            return False
        time.sleep(0.1)


def _stop(procs: list[Any]) -> None:
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(timeout=15)
        if p.is_alive():
            p.kill()
            p.join()


def _reset(url: str) -> redis.Redis:
    from ffcore.connection import ensure_partition_config
    from ffcore.settings import Settings

    r = redis.Redis.from_url(redis_url(url))
    r.flushall()
    ensure_partition_config(r, Settings.from_url(url).partitions)
    return r


def _warm(r: redis.Redis, submit: Callable[[list[int]], None], label: str) -> bool:
    """One task end to end before timing: workers are up and connected."""
    submit([-1])
    ok = _wait_marks(r, 1, 120, f"{label} warm-up")
    r.delete(MARKS)
    return ok


def run_s1(system: System, url: str, n: int, processes: int) -> dict[str, Any]:
    r = _reset(url)
    os.environ["BENCH_URL"], os.environ["BENCH_KEY"] = url, MARKS
    submit = system.submitter(url)
    procs = system.start(url, processes)
    try:
        if not _warm(r, submit, system.name):
            return {"error": "workers did not start"}
        submitted: dict[int, float] = {}
        t0 = time.time()
        for start in range(0, n, system.batch):
            ids = list(range(start, min(n, start + system.batch)))
            now = time.time()
            submit(ids)
            for i in ids:
                submitted[i] = now
            if start % max(system.batch, n // 5) < system.batch:
                progress(f"{system.name}: submitted {start + len(ids)}/{n}")
        enqueue_s = time.time() - t0
        if not _wait_marks(r, n, 600, system.name):
            return {"error": f"only {r.llen(MARKS)} of {n} tasks ran"}
        marks = read_marks(r, MARKS)
    finally:
        _stop(procs)
    missing = [i for i in range(n) if i not in marks]
    if missing:
        return {"error": f"{len(missing)} tasks never ran"}
    lat = sorted((marks[i] - submitted[i]) * 1000 for i in range(n))
    span = max(marks.values()) - t0
    return {"tasks_per_s": n / span, "p50_ms": percentile(lat, 50), "p95_ms": percentile(lat, 95),
            "enqueue_per_s": n / enqueue_s, "n": n, "processes": processes, "setup": system.note}


def run_s5(system: System, url: str, rate: float, seconds: float, processes: int) -> dict[str, Any]:
    r = _reset(url)
    os.environ["BENCH_URL"], os.environ["BENCH_KEY"] = url, MARKS
    submit = system.submitter(url)
    procs = system.start(url, processes)
    n = int(rate * seconds)
    try:
        if not _warm(r, submit, system.name):
            return {"error": "workers did not start"}
        submitted: dict[int, float] = {}
        period, t0 = 1.0 / rate, time.monotonic()
        for i in range(n):
            delay = t0 + i * period - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            submitted[i] = time.time()
            submit([i])
        if not _wait_marks(r, n, 120, f"{system.name} S5"):
            return {"error": f"only {r.llen(MARKS)} of {n} tasks ran"}
        marks = read_marks(r, MARKS)
    finally:
        _stop(procs)
    lat = sorted((marks[i] - submitted[i]) * 1000 for i in range(n) if i in marks)
    return {"p50_ms": percentile(lat, 50), "p95_ms": percentile(lat, 95), "n": n, "offered_per_s": rate}
