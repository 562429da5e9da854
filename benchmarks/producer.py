"""The producer of one S1 / S5 run, as its own process that imports only its system's client (so no
system's client runs next to another's imports, threads or garbage):

    python -m benchmarks.producer --client dramatiq --mode per_call --n 10000

Modes: `per_call` (one client call per task), `batched` (the client's batch API, `--batch` per call),
`threads` (`--threads` threads in this process, each making per-call calls, as a web app's request
handlers would), `paced` (one call every 1/`--rate` s, S5). Before timing it submits task -1 and waits for
its mark (the workers are up and connected), prints READY and waits for a line on stdin; then it submits
tasks 0..n-1 and prints one JSON line: submit window, its own CPU seconds over it, and each task's submit
time (the client's clock just before the call that carried it; a batch: before the batch).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import threading
import time
from collections.abc import Callable

import redis

from benchmarks.recorder import redis_url

Submit = Callable[[list[int]], None]


def _ours(batch: bool) -> Submit:
    from ffcore.backend import Backend
    from ffcore.execution.client import Client
    from ffcore.settings import Settings

    client = Client(Backend.connect(Settings.from_url(os.environ["BENCH_URL"])))
    if batch:
        return lambda ids: client.create_many([{"kind": "bench", "lane": "bench", "payload": str(i)} for i in ids])

    def one(ids: list[int]) -> None:
        for i in ids:
            client.create(kind="bench", lane="bench", payload=str(i))

    return one


def _dramatiq(batch: bool) -> Submit:
    from benchmarks.peers.dramatiq_tasks import noop

    def one(ids: list[int]) -> None:
        for i in ids:
            noop.send(i)

    return one


def _celery(batch: bool) -> Submit:
    from celery import group

    from benchmarks.peers.celery_tasks import noop

    if batch:
        return lambda ids: group(noop.s(i) for i in ids).apply_async()

    def one(ids: list[int]) -> None:
        for i in ids:
            noop.delay(i)

    return one


def _rq(batch: bool) -> Submit:
    from rq import Queue

    from benchmarks.peers.rq_tasks import noop

    q = Queue(connection=redis.Redis.from_url(redis_url(os.environ["BENCH_URL"])))
    if batch:
        return lambda ids: q.enqueue_many([Queue.prepare_data(noop, args=(i,)) for i in ids])

    def one(ids: list[int]) -> None:
        for i in ids:
            q.enqueue(noop, i)

    return one


def _arq(batch: bool) -> Submit:
    # One event loop and pool per caller (thread): asyncio objects are not shared across threads.
    from arq import create_pool
    from arq.connections import RedisSettings

    loop = asyncio.new_event_loop()
    pool = loop.run_until_complete(create_pool(RedisSettings.from_dsn(redis_url(os.environ["BENCH_URL"]))))

    async def enqueue(ids: list[int]) -> None:
        for i in ids:
            await pool.enqueue_job("noop", i)

    return lambda ids: loop.run_until_complete(enqueue(ids))


CLIENTS: dict[str, Callable[[bool], Submit]] = {"ours": _ours, "dramatiq": _dramatiq, "celery": _celery,
                                                "rq": _rq, "arq": _arq}


def _warm(submit: Submit) -> None:
    marks = redis.Redis.from_url(redis_url(os.environ["BENCH_MARKS_URL"]))
    key = os.environ["BENCH_KEY"]
    submit([-1])
    while not marks.llen(key):
        time.sleep(0.02)
    marks.delete(key)


def _timed(args: argparse.Namespace, submit: Submit, per_thread: list[Submit]) -> list[float]:
    n, at = args.n, [0.0] * args.n
    if args.mode == "threads":
        def run(k: int) -> None:
            for i in range(k, n, args.threads):
                at[i] = time.time()
                per_thread[k]([i])

        threads = [threading.Thread(target=run, args=(k,)) for k in range(args.threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return at
    step = args.batch if args.mode == "batched" else 1
    period, start = 1.0 / args.rate, time.monotonic()
    for first in range(0, n, step):
        if args.mode == "paced" and (delay := start + first * period - time.monotonic()) > 0:
            time.sleep(delay)
        ids = list(range(first, min(n, first + step)))
        now = time.time()
        submit(ids)
        for i in ids:
            at[i] = now
    return at


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--client", choices=sorted(CLIENTS), required=True)
    ap.add_argument("--mode", choices=("per_call", "batched", "threads", "paced"), required=True)
    ap.add_argument("--n", type=int, required=True)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--rate", type=float, default=100.0, help="paced: tasks per second")
    args = ap.parse_args(argv)
    make = CLIENTS[args.client]
    submit = make(args.mode == "batched")
    # arq's clients are per thread; the others are shared by the threads, as a web app shares its client.
    per_thread = [make(False) if args.client == "arq" else submit for _ in range(args.threads)] \
        if args.mode == "threads" else []
    _warm(submit)
    print("READY", flush=True)
    sys.stdin.readline()
    t0, cpu0 = time.time(), time.process_time()
    at = _timed(args, submit, per_thread)
    t1, cpu1 = time.time(), time.process_time()
    print(json.dumps({"t0": t0, "t1": t1, "cpu_s": cpu1 - cpu0, "submitted": at}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
