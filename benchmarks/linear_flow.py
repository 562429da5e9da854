"""10-node linear flows end to end: time per flow (p50/p95) and flows per second.

    python benchmarks/linear_flow.py --flows 200                 # 200 chains submitted at once
    python benchmarks/linear_flow.py --flows 50 --sequential     # one chain at a time (pure latency)

Starts its own non-persistent embedded Valkey, worker processes with a no-op handler and one engine
process running the completion listener and the dependency reconciler. A flow's time is measured on
the server clock, from its creation to the completion of its last member; every member must complete
exactly once (one attempt). Exits 1 otherwise.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import percentile  # noqa: E402
from ffcore.backend import Backend  # noqa: E402
from ffcore.embedded import EmbeddedValkey  # noqa: E402
from ffcore.engine.base import run_scanners  # noqa: E402
from ffcore.engine.dag_listener import CompletionListener  # noqa: E402
from ffcore.engine.flow_scanners import DependencyReconciler  # noqa: E402
from ffcore.flows.flows import Flows  # noqa: E402
from ffcore.keys import ExecKeys  # noqa: E402
from ffcore.reads import text  # noqa: E402
from ffcore.settings import Settings  # noqa: E402
from ffcore.worker.task import ClaimedTask  # noqa: E402
from ffcore.worker.worker import Registry, Worker, WorkerConfig  # noqa: E402

LANE = "bench-flow"
NODES = 10


def run_worker(url: str, concurrency: int) -> None:
    reg = Registry()

    @reg.handler("*")
    def noop(task: ClaimedTask) -> None:
        return None

    backend = Backend.connect(Settings.from_url(url))
    Worker(backend, WorkerConfig(lanes=(LANE,), worker_id="bench", concurrency=concurrency, poll_interval_ms=5),
           reg).run()


def run_engine(url: str) -> None:
    backend = Backend.connect(Settings.from_url(url))
    run_scanners([CompletionListener(backend, interval_ms=1000),
                  DependencyReconciler(backend, interval_ms=2000)], threading.Event())


def build_chain(flows: Flows) -> tuple[str, list[str]]:
    fid = flows.create(kind="linear")
    ids = flows.build(fid, [{"kind": f"step{i}", "lane": LANE} for i in range(NODES)],
                      edges=[(i, i + 1) for i in range(NODES - 1)])
    return fid, [str(e) for e in ids]


def finished(backend: Backend, last_members: list[str]) -> int:
    pipe = backend.client.pipeline(transaction=False)
    for e in last_members:
        pipe.hget(ExecKeys(e).core, "public_state")
    return sum(1 for s in pipe.execute() if text(s) in ("completed", "failed", "skipped", "cancelled", "expired"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flows", type=int, default=200)
    ap.add_argument("--workers", type=int, default=2, help="worker processes")
    ap.add_argument("--concurrency", type=int, default=16, help="handler threads per worker")
    ap.add_argument("--sequential", action="store_true", help="submit the next flow when the previous finished")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        server = EmbeddedValkey(Path(tmp), persistent=False).start()
        procs: list[mp.Process] = []
        try:
            backend = Backend.connect(Settings.from_url(server.url))
            ctx = mp.get_context("spawn")
            procs = [ctx.Process(target=run_engine, args=(server.url,), daemon=True)]
            procs += [ctx.Process(target=run_worker, args=(server.url, args.concurrency), daemon=True)
                      for _ in range(args.workers)]
            for p in procs:
                p.start()
            time.sleep(2.0)  # let the processes connect and subscribe
            flows = Flows(backend)
            chains: list[tuple[str, list[str]]] = []
            t0 = time.monotonic()
            for _ in range(args.flows):
                chains.append(build_chain(flows))
                if args.sequential:
                    while not finished(backend, [chains[-1][1][-1]]):
                        time.sleep(0.001)
            lasts = [ids[-1] for _, ids in chains]
            deadline = time.monotonic() + 120
            while finished(backend, lasts) < len(lasts):
                if time.monotonic() > deadline:
                    print("FAILED: flows did not finish within 120 s")
                    return 1
                time.sleep(0.01)
            wall = time.monotonic() - t0
            return report(backend, flows, chains, wall, args)
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                p.join(5)
            server.stop()


def report(backend: Backend, flows: Flows, chains: list[tuple[str, list[str]]], wall: float,
           args: argparse.Namespace) -> int:
    per_flow: list[int] = []
    starts, ends = [], []
    bad = 0
    waits: list[int] = []  # upstream completed → downstream claimed, per edge
    runs: list[int] = []  # claimed → completed, per member
    for fid, ids in chains:
        pipe = backend.client.pipeline(transaction=False)
        pipe.hget(flows.keys(fid).core, "created_at")
        for e in ids:
            pipe.hmget(ExecKeys(e).core, ["public_state", "completed_at", "total_attempt_count",
                                          "lease_acquired_at"])
        created, *rows = pipe.execute()
        times = [(int(text(got) or 0), int(text(at) or 0)) for _, at, _, got in rows]
        runs += [done - got for got, done in times]
        waits += [times[i + 1][0] - times[i][1] for i in range(len(times) - 1)]
        bad += sum(1 for st, _, n, _ in rows if text(st) != "completed" or text(n) != "1")
        done = max(at for _, at in times)
        starts.append(int(text(created)))
        ends.append(done)
        per_flow.append(done - int(text(created)))
    per_flow.sort()
    waits.sort()
    runs.sort()
    span_s = (max(ends) - min(starts)) / 1000
    mode = "sequential" if args.sequential else "all at once"
    print(f"{len(chains)} linear flows of {NODES} nodes ({mode}), {args.workers} workers x {args.concurrency}")
    print(f"time per flow: p50 {percentile(per_flow, 50)} ms · p95 {percentile(per_flow, 95)} ms · "
          f"max {per_flow[-1]} ms")
    print(f"per edge, upstream completed → downstream claimed: p50 {percentile(waits, 50)} ms · "
          f"p95 {percentile(waits, 95)} ms; per member, claimed → completed: p50 {percentile(runs, 50)} ms")
    print(f"throughput: {len(chains) / span_s:.1f} flows/s ({len(chains) * NODES / span_s:.0f} members/s) "
          f"over {span_s:.2f} s (wall {wall:.2f} s)")
    if bad:
        print(f"FAILED: {bad} members did not complete exactly once")
        return 1
    print("OK: every member completed exactly once")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
