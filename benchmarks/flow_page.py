"""D2: server time of the flow page (full HTML, plus its graph.json) for flows of 1,000 and 10,000 members.

    python benchmarks/flow_page.py --sizes 1000,10000

Starts its own embedded Valkey, builds each flow through the real functions (members in a fan-out:
one root, every other member depending on it), renders /flows/<id>/ in-process through Django's test
client as a signed-in viewer, and prints p50/p95 per size. The first request of each size is also printed
on its own (stderr): it is the only one that reads the flow's topology; later ones find it cached for the
graph revision.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import dashboard_client, percentile  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--requests", type=int, default=10)
    args = ap.parse_args()
    server, http = dashboard_client(Path(tempfile.mkdtemp(prefix="ff-d2-")))
    try:
        from dashboard.backend import get_backend
        from ffcore.flows.flows import Flows

        flows = Flows(get_backend())
        # One request to a 2-member flow first, so the process's one-time costs (template compilation, the
        # first database and Valkey connections) are not charged to the first size's first request.
        tiny = flows.create()
        flows.build(tiny, [{"kind": "a", "lane": "flows"}, {"kind": "b", "lane": "flows"}], [(0, 1)])
        for warm in (f"/flows/{tiny}/", f"/flows/{tiny}/graph.json"):
            assert http.get(warm).status_code == 200
        print("| members | page p50 ms | page p95 ms | graph.json p50 ms |\n|---:|---:|---:|---:|")
        for size in (int(x) for x in args.sizes.split(",")):
            fid = flows.create()
            t0 = time.monotonic()
            root = flows.build(fid, [{"kind": "root", "lane": "flows"}])[0]
            for start in range(1, size, 500):
                n = min(500, size - start)
                flows.build(fid, [{"kind": "leaf", "lane": "flows"} for _ in range(n)],
                            [(root, i) for i in range(n)])
                print(f"\r  building {start + n:>6}/{size} members", end="", file=sys.stderr, flush=True)
            print(f"\r  built {size} members in {time.monotonic() - t0:.1f} s", file=sys.stderr)
            page, graph = [], []
            for _ in range(args.requests):
                t = time.perf_counter()
                r = http.get(f"/flows/{fid}/")
                page.append((time.perf_counter() - t) * 1000)
                assert r.status_code == 200, r.status_code
                t = time.perf_counter()
                r = http.get(f"/flows/{fid}/graph.json")
                graph.append((time.perf_counter() - t) * 1000)
                assert r.status_code == 200, r.status_code
            p50, p95, g50 = statistics.median(page), percentile(sorted(page), 95), statistics.median(graph)
            print(f"  {size} members: first page request {page[0]:.1f} ms", file=sys.stderr, flush=True)
            print(f"| {size:,} | {p50:.1f} | {p95:.1f} | {g50:.1f} |", flush=True)
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
