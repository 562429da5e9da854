"""End-to-end lifecycle throughput: create N no-op executions, drain them with worker processes, verify.

    python benchmarks/lifecycle_throughput.py --n 10000            # enqueue everything, then start the workers
    python benchmarks/lifecycle_throughput.py --n 10000 --live     # workers already running while enqueueing

Starts its own non-persistent embedded Valkey in a temporary directory and loads the library. Reports
enqueue rate, processing and end-to-end throughput (server clock), enqueue->completion p50/p95/p99, and
checks that every execution completed exactly once (one attempt, ended_success, public_state completed);
exits 1 if not.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import percentile  # noqa: E402
from ffcore.backend import Backend  # noqa: E402
from ffcore.embedded import EmbeddedValkey  # noqa: E402
from ffcore.execution.client import Client  # noqa: E402
from ffcore.keys import ExecKeys, LaneKeys  # noqa: E402
from ffcore.partition import lane_partition  # noqa: E402
from ffcore.reads import text  # noqa: E402
from ffcore.settings import Settings  # noqa: E402
from ffcore.worker.task import ClaimedTask  # noqa: E402
from ffcore.worker.worker import Registry, Worker, WorkerConfig  # noqa: E402
from ffcore.workers import list_workers  # noqa: E402

KIND = "bench-noop"


def run_worker(url: str, lanes: tuple[str, ...], concurrency: int) -> None:
    """Body of one worker process: a no-op handler, run until SIGTERM (graceful drain).

    Every process shares the worker_id `bench`, like replicas of one `ffworker` command."""
    reg = Registry()

    @reg.handler(KIND)
    def noop(task: ClaimedTask) -> None:
        return None

    backend = Backend.connect(Settings.from_url(url))
    Worker(backend, WorkerConfig(lanes=lanes, worker_id="bench", concurrency=concurrency), reg).run()


def wait_until(what: str, check: Callable[[], object], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"FAILED: timed out waiting for {what}")
        time.sleep(0.05)


class Bench:
    def __init__(self, backend: Backend, args: argparse.Namespace) -> None:
        self.backend = backend
        self.args = args
        self.lanes = tuple(f"bench-{i}" for i in range(args.lanes))
        self.procs: list[mp.process.BaseProcess] = []
        self.eids: list[str] = []

    def start_workers(self) -> None:
        ctx = mp.get_context("spawn")
        for i in range(self.args.workers):
            p = ctx.Process(target=run_worker, args=(self.backend.url, self.lanes, self.args.concurrency),
                            name=f"bench-worker-{i}")
            p.start()
            self.procs.append(p)
        wait_until("the workers to register", lambda: len(list_workers(self.backend)) >= self.args.workers, 60)
        print(f"{self.args.workers} worker processes running (concurrency {self.args.concurrency} each)")

    def stop_workers(self) -> None:
        for p in self.procs:
            if p.is_alive():
                p.terminate()  # SIGTERM: graceful drain
        for p in self.procs:
            p.join(timeout=40)
            if p.is_alive():
                p.kill()
                p.join()

    def enqueue(self) -> float:
        client, n, batch = Client(self.backend), self.args.n, self.args.batch
        t0 = time.perf_counter()
        for start in range(0, n, batch):
            lanes = (self.lanes[i % len(self.lanes)] for i in range(start, min(n, start + batch)))
            specs = [{"kind": KIND, "lane": lane} for lane in lanes]
            self.eids += [r.execution_id for r in client.create_many(specs)]
            if len(self.eids) % max(batch, n // 10) < batch or len(self.eids) == n:
                print(f"  created {len(self.eids):>7}/{n}")
        return time.perf_counter() - t0

    def completed(self) -> int:
        parts = self.backend.settings.partitions.flow
        pipe = self.backend.client.pipeline(transaction=False)
        for lane in self.lanes:
            pipe.zcard(LaneKeys(lane_partition(lane, parts), lane).terminal)
        return sum(int(x) for x in pipe.execute())

    def wait_all_completed(self) -> None:
        last, last_change = -1, time.monotonic()
        while (done := self.completed()) < self.args.n:
            if done != last:
                last, last_change = done, time.monotonic()
                print(f"  completed {done:>7}/{self.args.n}")
            elif time.monotonic() - last_change > 60:
                raise SystemExit(f"FAILED: no progress for 60 s at {done}/{self.args.n}")
            time.sleep(0.25)
        print(f"  completed {self.args.n:>7}/{self.args.n}")

    def verify(self) -> tuple[list[str], list[int], list[int], list[int]]:
        """Per execution: one attempt, ended_success, public_state completed. Returns problems and timestamps."""
        problems: list[str] = []
        created: list[int] = []
        started: list[int] = []
        completed: list[int] = []
        fields = ["public_state", "total_attempt_count", "created_at", "started_at", "completed_at"]
        for off in range(0, len(self.eids), 1000):
            chunk = self.eids[off: off + 1000]
            pipe = self.backend.client.pipeline(transaction=False)
            for e in chunk:
                k = ExecKeys(e)
                pipe.hmget(k.core, fields)
                pipe.zrange(k.attempts, 0, -1)
                pipe.hget(k.attempt(0), "attempt_state")
            raw = pipe.execute()
            for i, e in enumerate(chunk):
                core, attempts, state0 = raw[3 * i: 3 * i + 3]
                state, total, c_at, s_at, d_at = (text(x) for x in core)
                if state != "completed" or total != "1" or [text(a) for a in attempts] != ["0"] \
                        or text(state0) != "ended_success":
                    problems.append(f"{e}: public_state={state} attempts={[text(a) for a in attempts]} "
                                    f"attempt0={text(state0)}")
                    continue
                created.append(int(c_at))
                started.append(int(s_at))
                completed.append(int(d_at))
        return problems, created, started, completed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=10_000, help="executions to create")
    ap.add_argument("--workers", type=int, default=2, help="worker processes")
    ap.add_argument("--concurrency", type=int, default=16, help="concurrent tasks per worker")
    ap.add_argument("--batch", type=int, default=500, help="executions per create_many pipeline")
    ap.add_argument("--lanes", type=int, default=1, help="spread executions over this many lanes (partitions)")
    ap.add_argument("--live", action="store_true", help="start the workers before enqueueing")
    args = ap.parse_args(argv)
    if args.n < 1 or args.workers < 1 or args.batch < 1 or args.lanes < 1:
        ap.error("--n, --workers, --batch and --lanes must be positive")

    with tempfile.TemporaryDirectory(prefix="ff-bench-") as tmp:
        server = EmbeddedValkey(tmp, persistent=False).start()
        backend = Backend.connect(Settings.from_url(server.url))
        print(f"embedded {backend.server} on {server.url}, library {backend.build}")
        bench = Bench(backend, args)
        try:
            if args.live:
                bench.start_workers()
            print(f"creating {args.n} executions in batches of {args.batch} over {args.lanes} lane(s)")
            enqueue_s = bench.enqueue()
            if not args.live:
                bench.start_workers()
            bench.wait_all_completed()
            problems, created, started, completed = bench.verify()
        finally:
            bench.stop_workers()
            backend.close()
            server.stop()

    print()
    print(f"enqueue:     {args.n} in {enqueue_s:.2f} s = {args.n / enqueue_s:,.0f} executions/s")
    if created:
        e2e_ms = max(completed) - min(created)
        proc_ms = max(completed) - min(started)
        lat = sorted(d - c for c, d in zip(created, completed, strict=True))
        print(f"processing:  {len(completed) / max(proc_ms, 1) * 1000:,.0f} tasks/s "
              f"(first claim -> last completion, {proc_ms / 1000:.2f} s)")
        print(f"end to end:  {len(completed) / max(e2e_ms, 1) * 1000:,.0f} tasks/s "
              f"(first create -> last completion, {e2e_ms / 1000:.2f} s)")
        print(f"enqueue->completion latency: p50 {percentile(lat, 50)} ms, p95 {percentile(lat, 95)} ms, "
              f"p99 {percentile(lat, 99)} ms, max {lat[-1]} ms")
    if problems:
        print(f"VERIFICATION FAILED: {len(problems)} of {args.n} executions not completed exactly once")
        for p in problems[:10]:
            print("  " + p)
        return 1
    print(f"verified: all {args.n} executions completed exactly once "
          "(one attempt, ended_success, public_state completed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
