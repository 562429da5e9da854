"""Suspend -> signal -> resume latency through the SDK, one round trip at a time.

    python benchmarks/suspend_signal_resume.py               # 1,000 round trips
    python benchmarks/suspend_signal_resume.py --n 5000 --executions 50

One round trip: a claimed task calls `task.suspend("approved")` (lease released, token minted), a
signaller calls `Signals.deliver(...)` with the token (the condition is satisfied, the execution is
eligible again), and a worker's `claim_next()` gets the resumed attempt back (same attempt, epoch + 1).
The clock runs from before the suspend to the resumed task in hand. Starts its own non-persistent
embedded Valkey in a temporary directory (or uses FF_VALKEY_URL) and prints p50/p99 of the round trip and
of each step, and checks every round resumed the same attempt.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ffcore import functions as F  # noqa: E402
from ffcore.backend import Backend  # noqa: E402
from ffcore.embedded import EmbeddedValkey  # noqa: E402
from ffcore.execution.client import Client  # noqa: E402
from ffcore.functions import Signal  # noqa: E402
from ffcore.ids import new_uuid  # noqa: E402
from ffcore.keys import ExecKeys  # noqa: E402
from ffcore.settings import Settings  # noqa: E402
from ffcore.suspension import hmac_secrets  # noqa: E402
from ffcore.suspension.signals import Signals  # noqa: E402
from ffcore.worker.task import ClaimedTask  # noqa: E402
from ffcore.worker.worker import Worker, WorkerConfig  # noqa: E402

LANE = "bench-suspend"


def percentile(sorted_values: list[float], pct: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, round(pct / 100 * (len(sorted_values) - 1)))]


def fmt(values: list[float]) -> str:
    v = sorted(values)
    return f"p50 {percentile(v, 50):7.3f} ms   p99 {percentile(v, 99):7.3f} ms   max {v[-1]:7.3f} ms"


def run(backend: Backend, n: int, executions: int) -> int:
    hmac_secrets.install(backend, hmac_secrets.generate_secret())
    client, signals = Client(backend), Signals(backend)
    worker = Worker(backend, WorkerConfig(lanes=(LANE,), worker_id="bench", concurrency=executions))
    eids = [r.execution_id for r in client.create_many([{"kind": "approve", "lane": LANE}] * executions)]
    tasks: dict[str, ClaimedTask] = {}
    while len(tasks) < executions:
        for t in worker.claim_next(executions - len(tasks)):
            tasks[t.execution_id] = t
    total: list[float] = []
    steps: dict[str, list[float]] = {"suspend": [], "signal": [], "claim resumed": []}
    bad = 0
    for i in range(n):
        eid = eids[i % executions]
        t = tasks.pop(eid)
        t0 = time.perf_counter()
        out = t.suspend("approved")
        t1 = time.perf_counter()
        got = signals.deliver(eid, out.waitpoint_id, Signal("approved", payload=b'{"ok":true}'), out.token)
        t2 = time.perf_counter()
        again: ClaimedTask | None = None
        while again is None:
            for c in worker.claim_next(1):
                if c.execution_id == eid:
                    again = c
                else:  # cannot happen with one task out at a time; keep it for the next round anyway
                    tasks[c.execution_id] = c
        t3 = time.perf_counter()
        if not got.resumed or again.attempt_id != t.attempt_id or again.lease_epoch != t.lease_epoch + 1:
            bad += 1
        tasks[eid] = again
        total.append((t3 - t0) * 1000)
        steps["suspend"].append((t1 - t0) * 1000)
        steps["signal"].append((t2 - t1) * 1000)
        steps["claim resumed"].append((t3 - t2) * 1000)
    print(f"suspend -> signal -> resume, {n} round trips over {executions} execution(s), "
          f"{backend.settings.partitions.flow} partitions")
    print(f"  round trip     {fmt(total)}")
    for name, values in steps.items():
        print(f"  {name:<14} {fmt(values)}")
    print(f"  throughput     {n / (sum(total) / 1000):,.0f} round trips/s (one at a time)")
    bad += direct(backend, tasks.pop(eids[0]), n)
    for t in tasks.values():
        t.complete()
    if bad:
        print(f"FAILED: {bad} round trips did not resume the same attempt")
    return 1 if bad else 0


def direct(backend: Backend, t: ClaimedTask, n: int) -> int:
    """The same round trip as raw FCALLs (suspend; deliver; grant + claim_resumed pipelined): the engine's
    own cost, without the SDK's lane pre-read and the claimer's partition probe."""
    k, f = ExecKeys(t.execution_id), t.fence
    t.consumed = True  # driven by hand from here
    total: list[float] = []
    bad = 0
    for _ in range(n):
        wid = new_uuid()
        t0 = time.perf_counter()
        out = backend.call(F.suspend_execution(k, f, suspension_id=new_uuid(), waitpoint_id=wid,
                                               waitpoint_key=f"wpk:{wid}", condition_json=COND, policy_json="{}"))
        got = backend.call(F.deliver_signal(k, lane=f.lane, waitpoint_id=wid, signal_id=new_uuid(),
                                            signal=Signal("approved"), token=out[3]))
        grant, claim = backend.call_many([
            F.issue_claim_grant(k, lane=f.lane, worker_id="bench", worker_instance_id=f.worker_instance_id),
            F.claim_resumed_execution(k, lane=f.lane, worker_id="bench", worker_instance_id=f.worker_instance_id,
                                      lease_id=new_uuid(), lease_ttl_ms=30_000, attempt_index=f.attempt_index)])
        total.append((time.perf_counter() - t0) * 1000)
        if isinstance(claim, Exception) or got[1] != "resume_condition_satisfied":
            bad += 1
            break
        f = F.Fence(claim[0], int(claim[1]), claim[3], int(claim[4]), f.worker_instance_id, f.lane)
    print(f"  raw FCALLs     {fmt(total)}   (suspend; deliver; grant+claim_resumed pipelined)")
    backend.call(F.complete_execution(k, f))
    return bad


COND = '{"condition_type":"signal_set","required_signal_names":["approved"],"signal_match_mode":"any",' \
       '"minimum_signal_count":1}'


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1000, help="round trips")
    ap.add_argument("--executions", type=int, default=1, help="executions cycled through (one in flight at a time)")
    args = ap.parse_args()
    url = os.environ.get("FF_VALKEY_URL")
    server = None
    if not url:
        server = EmbeddedValkey(tempfile.mkdtemp(prefix="ff-bench-"), persistent=False).start()
        url = server.url
    backend = Backend.connect(Settings.from_url(url))
    try:
        return run(backend, args.n, args.executions)
    finally:
        backend.close()
        if server is not None:
            server.stop()


if __name__ == "__main__":
    sys.exit(main())
