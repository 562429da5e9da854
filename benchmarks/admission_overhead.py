"""What admission costs on the claim path: claim+complete throughput of one claimer, unattached vs
attached to a budget, a quota (concurrency cap), or both.

    python benchmarks/admission_overhead.py --n 2000

Starts its own non-persistent embedded Valkey. Prints tasks/s per variant and checks that the quota's
in-flight counter is back to 0 afterwards (every slot released).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ffcore.backend import Backend  # noqa: E402
from ffcore.budgets.budgets import create_budget  # noqa: E402
from ffcore.budgets.quotas import create_quota_policy, quota_keys  # noqa: E402
from ffcore.embedded import EmbeddedValkey  # noqa: E402
from ffcore.execution.client import Client  # noqa: E402
from ffcore.policy import Policy  # noqa: E402
from ffcore.settings import Settings  # noqa: E402
from ffcore.worker.worker import Worker, WorkerConfig  # noqa: E402


def run(backend: Backend, n: int, policy: Policy, batch: int) -> float:
    c = Client(backend)
    for i in range(0, n, 500):
        c.create_many([{"kind": "bench", "policy": policy} for _ in range(min(500, n - i))])
    w = Worker(backend, WorkerConfig(worker_id="bench", concurrency=batch))
    done, started = 0, time.perf_counter()
    while done < n:
        tasks = w.claim_next(batch)
        for t in tasks:
            t.complete()
        done += len(tasks)
    return n / (time.perf_counter() - started)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=8)
    args = ap.parse_args()
    server = EmbeddedValkey(Path(tempfile.mkdtemp()), persistent=False).start()
    try:
        b = Backend.connect(Settings.from_url(server.url))
        bid, _ = create_budget(b, hard={"tokens": 10**12})
        qid, _ = create_quota_policy(b, window_seconds=0, max_concurrent=args.batch)
        variants = {"unattached": Policy(), "budget": Policy(budget_ids=(bid,)),
                    "quota (cap = batch)": Policy(quota_policy_id=qid),
                    "budget + quota": Policy(budget_ids=(bid,), quota_policy_id=qid)}
        for name, policy in variants.items():
            rate = run(b, args.n, policy, args.batch)
            print(f"{name:22s} {rate:8.0f} claim+complete/s  (one claimer, batches of {args.batch})")
        left = int(b.client.get(quota_keys(b, qid).concurrency) or 0)
        print(f"quota in flight afterwards: {left}")
        if left:
            raise SystemExit("FAILED: quota slots leaked")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
