"""What a Valkey Cluster costs here (`python -m benchmarks.run --cluster`): S1 for ours (per call and batched)
and D1, each on one embedded Valkey and on a local 3-primary Valkey Cluster (ffcore.embedded.EmbeddedCluster),
in the same run.

S1 runs as in the main harness (benchmarks/queues.py: `ffworker` × 2 processes, a producer process, the marks
on a server of their own), rounds interleaved over single node and cluster; on the cluster, Valkey's CPU
and commands per task are summed over the three nodes. D1 is benchmarks/dashboard_list.py, once per setup.
The peers are not run on the cluster: their clients (Dramatiq's, RQ's, arq's…) take one server's URL.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.common import cpu_ticks, machine, progress, steal_percent
from benchmarks.systems import all_systems

SETUPS = ("single node", "cluster")
MODES = (("per_call", "per call: `Client.create()` per task"), ("batched", "batched: `create_many`, 100 per call"))


def run(args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks.queues import Bench
    from benchmarks.run import _median_run
    from ffcore.backend import Backend
    from ffcore.embedded import EmbeddedCluster, EmbeddedValkey
    from ffcore.settings import Settings

    n = 1000 if args.quick else args.n
    rounds = 1 if args.quick else args.rounds
    ours = next(s for s in all_systems(args.concurrency) if s.client == "ours" and not s.variant)
    results: dict[str, Any] = {}
    servers: list[Any] = []
    ticks = cpu_ticks()
    with tempfile.TemporaryDirectory(prefix="ff-bench-cluster-") as tmp:
        try:
            single = EmbeddedValkey(Path(tmp) / "valkey", persistent=False).start()
            servers.append(single)
            cluster = EmbeddedCluster(Path(tmp) / "cluster").start()
            servers.append(cluster)
            marks = EmbeddedValkey(Path(tmp) / "marks", persistent=False).start()
            servers.append(marks)
            backend = Backend.connect(Settings.from_url(single.url))
            info = machine(backend.server)
            backend.close()
            progress(f"Valkey {info['valkey']}: one server on {single.url}, a 3-primary cluster on {cluster.url}")
            benches = {"single node": Bench(single.url, marks.url, args.concurrency, args.processes),
                       "cluster": Bench(cluster.url, marks.url, args.concurrency, args.processes,
                                        [node.url for node in cluster.nodes])}
            runs: dict[str, dict[str, list[dict[str, Any]]]] = {}
            for k in range(rounds):
                for mode, _ in MODES:
                    for where, bench in benches.items():
                        progress(f"S1 round {k + 1}/{rounds}: ours, {mode}, {where}")
                        runs.setdefault(mode, {}).setdefault(where, []).append(bench.s1(ours, mode, n))
            results["S1"] = {mode: {where: _median_run(got) for where, got in by.items()} for mode, by in runs.items()}
            results["D1"] = {where: _d1(args.quick, where == "cluster") for where in SETUPS}
        finally:
            for server in reversed(servers):
                server.stop()
        info["cpu_steal_percent"] = steal_percent(ticks, cpu_ticks())
        info["load_avg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    return {"when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "quick": args.quick, "cluster": True,
            "machine": info, "results": results}


def d1_sizes(quick: bool) -> str:
    # 1k and 100k, not the main run's 1M: loading a million executions twice would double the run's length,
    # and the page does the same reads at every size (the main run shows it flat up to 1M).
    return "1000,10000" if quick else "1000,100000"


def _d1(quick: bool, cluster: bool) -> dict[str, Any]:
    from benchmarks.run import _script

    requests, rounds = ("10", "1") if quick else ("150", "3")
    args = ["benchmarks/dashboard_list.py", "--sizes", d1_sizes(quick), "--requests", requests, "--rounds", rounds]
    text, err = _script([*args, "--cluster"] if cluster else args, 1800)
    if err:
        return {"error": err}
    rows = re.findall(r"^\| ([\d,]+) \| ([^|]+) \| ([\d.]+) \| ([\d.]+) \|$", text, re.M)
    memory = {int(s.replace(",", "")): int(b.replace(",", ""))
              for s, b in re.findall(r"^\s+([\d,]+)\s+memory: ([\d,]+) bytes", text, re.M)}
    return {"rows": [{"executions": int(s.replace(",", "")), "view": v.strip(), "p50_ms": float(a), "p95_ms": float(b)}
                     for s, v, a, b in rows], "bytes_per_stored_execution": memory}


def markdown(doc: dict[str, Any]) -> str:
    from benchmarks.run import _cost, _f

    r, m = doc["results"], doc["machine"]
    lines = [f"Measured {doc['when']}{' (quick run: reduced sizes)' if doc['quick'] else ''} on {m['cores']} cores "
             f"({m['cpu']}), {m['memory_gb']} GB, Python {m['python']}, Valkey {m['valkey']}; load average at "
             f"start {m['load_avg_at_start']}, at the end {m.get('load_avg_at_end')}; CPU steal "
             f"{m.get('cpu_steal_percent')} %. One embedded Valkey against a local 3-primary Valkey Cluster "
             "(`EmbeddedCluster`, no replicas) on the same machine, same run. Ours only: the peers are not run "
             "on a cluster.", ""]
    s1 = r.get("S1", {})
    n = next((v["n"] for t in s1.values() for v in t.values() if "n" in v), "?")
    lines += [f"**S1, ours** — {n} no-op tasks, `ffworker --concurrency 64` × 2 processes, one producer process; "
              "Valkey CPU and commands summed over the cluster's three nodes. Each row its median round of "
              "interleaved rounds.", "",
              "| mode | Valkey | tasks/s | vs single node | p50 ms | p95 ms | submit/s "
              "| CPU µs/task: total (Valkey + workers + producer) | commands/task | rounds (tasks/s) |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for mode, title in MODES:
        table = s1.get(mode, {})
        base = table.get("single node", {}).get("tasks_per_s")
        for where in SETUPS:
            v = table.get(where, {})
            if "error" in v or not v:
                lines.append(f"| {title} | {where} | error: {v.get('error', 'not run')} | | | | | | | |")
                continue
            vs = f"{v['tasks_per_s'] / base:.2f}×" if base else "—"
            each = ", ".join(_f(x) for x in v.get("rounds_tasks_per_s", []))
            lines.append(f"| {title} | {where} | {_f(v['tasks_per_s'])} | {vs} | {_f(v['p50_ms'], digits=1)} "
                         f"| {_f(v['p95_ms'], digits=1)} | {_f(v['submit_per_s'])} | {_cost(v)} "
                         f"| {_f(v['commands_per_task'], digits=1)} | {each} |")
    lines.append("")
    d1 = r.get("D1", {})
    lines += ["**D1** — executions list page (50 rows, full HTML), p50 / p95 ms; one server or cluster per size.",
              "", "| executions stored | view | single node | cluster |", "|---:|---|---:|---:|"]
    by = {where: {(x["executions"], x["view"]): x for x in d1.get(where, {}).get("rows", [])} for where in SETUPS}
    for key in by["single node"] | by["cluster"]:
        cells = [f"{by[w][key]['p50_ms']:.1f} / {by[w][key]['p95_ms']:.1f}" if key in by[w] else "—" for w in SETUPS]
        lines.append(f"| {key[0]:,} | {key[1]} | {cells[0]} | {cells[1]} |")
    for where in SETUPS:
        if "error" in d1.get(where, {}):
            lines.append(f"\nD1 on the {where}: error: {d1[where]['error']}")
    return "\n".join(lines) + "\n"
