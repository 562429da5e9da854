"""S4's worker processes (benchmarks.engine_benches.routing): `python -m benchmarks.routed_workers URL FIRST LAST`
runs one worker per capability cap-FIRST .. cap-(LAST-1) — lane "routed", concurrency 1, each in its own
connection pool as separate deployments would have — until its stdin closes. Every task records
"<execution id> <capability its payload names> <capability of the worker that ran it> <unix time>" on the
list MARKS of the same server (S4 measures throughput and latency, not the server's CPU)."""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

from ffcore.backend import Backend
from ffcore.settings import Settings
from ffcore.worker.task import ClaimedTask
from ffcore.worker.worker import Registry, Worker, WorkerConfig

MARKS = "bench:s4:marks"
LANE = "routed"


def _worker(settings: Settings, j: int) -> Worker:
    reg, cap = Registry(), f"cap-{j}"
    backend = Backend.connect(settings, load=False)

    @reg.handler(LANE)
    def run(task: ClaimedTask) -> None:
        backend.client.rpush(MARKS, f"{task.execution_id} {task.json()['cap']} {cap} {time.time():.6f}")

    return Worker(backend, WorkerConfig(lanes=(LANE,), worker_id=f"w{j}", capabilities=(cap,), concurrency=1), reg)


def main(argv: list[str]) -> None:
    url, first, last = argv[0], int(argv[1]), int(argv[2])
    settings = Settings.from_url(url)
    workers = [_worker(settings, j) for j in range(first, last)]
    threads = [threading.Thread(target=w.run, kwargs={"install_signal_handlers": False}, daemon=True)
               for w in workers]
    for t in threads:
        t.start()
    print("READY", flush=True)
    sys.stdin.read()  # until the parent closes our stdin (or exits)
    for w in workers:
        w.stop()
    for t in threads:
        t.join(timeout=10)
    for w in workers:
        w.backend.close()


def read_marks(client: Any) -> list[tuple[str, str, str, float]]:
    out = []
    for raw in client.lrange(MARKS, 0, -1):
        eid, wanted, ran_on, at = raw.decode().split()
        out.append((eid, wanted, ran_on, float(at)))
    return out


if __name__ == "__main__":
    main(sys.argv[1:])
