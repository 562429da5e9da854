"""D1: server time of the executions list page (50 rows, full HTML) with N executions stored.

    python benchmarks/dashboard_list.py --sizes 1000,100000,1000000
    python benchmarks/dashboard_list.py --sizes 1000,10000 --cluster   # each size on a local 3-primary cluster

Starts one embedded Valkey per size, bulk-loads each through the real create function (pipelined,
with progress; every execution carries one of five `team` tags), then renders /executions/ (newest first,
filtered by state, by kind, by tag)
in-process through Django's test client as a signed-in viewer, and prints p50/p95 per size. Timing
starts after `settle()` (the loader's garbage collected and frozen) and runs in interleaved rounds: the
dashboard is pointed at each size's server in turn (warm-up requests first), the views timed round
robin — so a slow spell of a shared machine lands on every size alike instead of on whichever size was
timed last. Also prints M1-style memory per stored (unfinished) execution. Not part of the test run.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import dashboard_client, embedded_server, percentile  # noqa: E402


def load(client: object, total: int, already: int, batch: int = 2000) -> None:
    from ffcore.execution.client import Client

    assert isinstance(client, Client)
    lanes = ["default", "emails", "reports", "gpu"]
    t0, done = time.monotonic(), already
    while done < total:
        n = min(batch, total - done)
        client.create_many([{"kind": f"k{(done + i) % 7}", "lane": lanes[(done + i) % 4], "payload": b"x" * 100,
                             "tags": {"team": f"t{(done + i) % 5}"}} for i in range(n)])
        done += n
        rate = (done - already) / max(1e-9, time.monotonic() - t0)
        print(f"\r  loading {done:>9,}/{total:,}  {rate:,.0f}/s", end="", flush=True)
    print()


def settle() -> None:
    """Between loading and timing: the loader's garbage is collected and what survives is frozen (else
    the cyclic GC's full passes over a million-create heap land inside the timed requests, and at 1M
    that, not the page, is what grows), and the server gets a moment to finish incremental rehashing
    of its grown tables."""
    gc.collect()
    gc.freeze()
    time.sleep(2.0)


def use_server(url: str) -> None:
    """Point the in-process dashboard at the Valkey at `url` (its backend is reconnected on next use)."""
    from dataclasses import replace

    from django.conf import settings

    from dashboard.backend import get_backend, reset_backend

    settings.FF_SETTINGS = replace(settings.FF_SETTINGS, valkey_url=url)
    reset_backend()
    assert get_backend().url == url  # the pages timed next read this server


def used_memory(client: Any) -> int:
    """used_memory of the server, or summed over a cluster's primaries."""
    if not hasattr(client, "get_primaries"):
        return int(client.info("memory")["used_memory"])
    return sum(int(v["used_memory"]) for v in client.info("memory", target_nodes="primaries").values())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="1000,100000")
    ap.add_argument("--requests", type=int, default=30, help="timed requests per view and size")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds over the sizes")
    ap.add_argument("--cluster", action="store_true", help="each size on a local 3-primary Valkey Cluster")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    tmp = Path(tempfile.mkdtemp(prefix="ff-d1-"))
    server, http = dashboard_client(tmp, args.cluster)
    servers = [server]
    try:
        from dashboard.backend import get_backend
        from ffcore.execution.client import Client
        servers += [embedded_server(tmp / f"valkey-{size}", args.cluster) for size in sizes[1:]]
        for size, srv in zip(sizes, servers, strict=True):
            use_server(srv.url)
            backend = get_backend()
            load(Client(backend), size, 0)
            used = used_memory(backend.client)
            print(f"  {size:>9,}  memory: {used / size:,.0f} bytes per stored execution (waiting, 100-byte payload)")
        settle()
        views = (("newest first", "/executions/"), ("state=waiting", "/executions/?state=waiting"),
                 ("kind filter", "/executions/?kind=k3"), ("tag filter", "/executions/?tag=team%3Dt2"))
        times: dict[tuple[int, str], list[float]] = {(size, label): [] for size in sizes for label, _ in views}
        per_round = max(1, args.requests // args.rounds)
        for k in range(args.rounds):
            for size, srv in zip(sizes, servers, strict=True):
                use_server(srv.url)
                for _ in range(5 if k else 10):  # warm-up: connections, templates, interpreter specialization
                    for _, url in views:
                        http.get(url)
                # Round robin over the views as well.
                for _ in range(per_round):
                    for label, url in views:
                        t0 = time.perf_counter()
                        r = http.get(url)
                        times[(size, label)].append((time.perf_counter() - t0) * 1000)
                        assert r.status_code == 200 and r.content.count(b'<tr data-href="/executions/') == 50
        rows = []
        for size in sizes:
            for label, _ in views:
                got = sorted(times[(size, label)])
                rows.append((size, label, statistics.median(got), percentile(got, 95)))
                print(f"  {size:>9,}  {label:<14} p50 {rows[-1][2]:7.1f} ms   p95 {rows[-1][3]:7.1f} ms")
        print("\n| executions stored | view | p50 ms | p95 ms |\n|---:|---|---:|---:|")
        for size, label, p50, p95 in rows:
            print(f"| {size:,} | {label} | {p50:.1f} | {p95:.1f} |")
    finally:
        for srv in servers:
            srv.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
