"""Where our per-call path spends its time (issue #21): one S1 run of ours (`ffworker` × 2, one create()
per task by default), observed three ways over its timed part:

- py-spy on each worker process (sampling, non-blocking): Python CPU by thread role and by function;
- MONITOR on the measured Valkey: each client call by name (FCALLs by function) and, for every FCALL, the
  commands its Lua ran (MONITOR shows those as coming from "lua"), per task;
- the harness's own figures (CPU per task, INFO commandstats) from a run without the observers.

    python -m benchmarks.profile_per_call --n 5000            # writes benchmarks/results/profile-*.txt too

MONITOR and sampling slow the observed run, so its tasks/s is not a result; the shares are what counts.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

import redis

from benchmarks.common import REPO, progress
from benchmarks.queues import Bench
from benchmarks.recorder import redis_url
from benchmarks.systems import all_systems

#: Thread roles by the name ffcore gives its threads (py-spy's raw output names each sample's thread).
ROLES = (("ff-task-", "pool threads (slow handlers; the driver after a hand-over)"),
         ("ff-async", "async handlers (the process's event loop)"),
         ("MainThread", "the driver (wake channel, claims, completions, renewals, heartbeat; quick handlers)"),
         ("ff-events", "event publisher"))


_END = "bench-profile-end"


class Monitor:
    """Counts what the server runs: client calls by name (FCALL by function) and Lua's calls per FCALL."""

    def __init__(self, url: str) -> None:
        self.client = redis.Redis.from_url(redis_url(url))
        self.calls: collections.Counter[str] = collections.Counter()
        self.lua: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()
        if not self._ready.wait(10):
            raise SystemExit("MONITOR did not start")

    def stop(self) -> None:
        # The reader lags behind the server: it stops at a marker sent now, having read everything before it.
        self.client.echo(_END)
        self._thread.join(timeout=60)

    def _run(self) -> None:
        current = ""  # the FCALL whose Lua is running: MONITOR shows a script's commands right after it
        with self.client.monitor() as m:
            self._ready.set()
            for ev in m.listen():
                words = ev["command"].split()
                if not words:
                    continue
                name = words[0].lower()
                if name == "echo" and _END in words:
                    return
                if ev.get("client_address") == "lua":
                    self.lua[current][name] += 1
                    continue
                if name in ("fcall", "fcall_ro") and len(words) > 1:
                    name = words[1]
                current = name
                self.calls[name] += 1


def _py_spy(pids: list[int], out: Path) -> Callable[[], list[Path]]:
    procs = []
    for pid in pids:
        f = out / f"py-spy-{pid}.txt"
        procs.append((subprocess.Popen(["py-spy", "record", "--pid", str(pid), "--format", "raw", "--rate", "500",
                                        "--nonblocking", "--gil", "--threads", "-o", str(f)],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), f))

    def stop() -> list[Path]:
        for p, _ in procs:
            p.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
        for p, _ in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        return [f for _, f in procs if f.exists()]

    return stop


def _proc_counters(pids: list[int]) -> collections.Counter[str]:
    """User and system CPU seconds and context switches (all threads) of `pids`, from /proc."""
    out: collections.Counter[str] = collections.Counter()
    tick = 1 / os.sysconf("SC_CLK_TCK")
    for pid in pids:
        try:
            f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            out["user_s"] += int(f[11]) * tick
            out["system_s"] += int(f[12]) * tick
            for t in Path(f"/proc/{pid}/task").iterdir():
                for line in (t / "status").read_text().splitlines():
                    if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                        k, v = line.split(":")
                        out[k] += int(v)
        except OSError:
            continue
    return out


def _role(thread: str) -> str:
    return next((label for prefix, label in ROLES if prefix in thread), f"other ({thread})")


Counts = collections.Counter[str]


def _frame(fr: str) -> str:
    return re.sub(r":\d+\)$", ")", fr).replace(str(REPO) + "/", "")


def _profile(files: list[Path]) -> tuple[Counts, Counts, Counts, int]:
    """Samples by thread role, by function (self time) and by our functions (inclusive: ffcore/ and
    benchmarks/ frames, each counted once per sample), from py-spy's raw stacks."""
    roles: Counts = collections.Counter()
    selfs: Counts = collections.Counter()
    incl: Counts = collections.Counter()
    total = 0
    for f in files:
        for line in f.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            if not count.isdigit():
                continue
            frames = stack.split(";")
            # frames[0]: process, frames[1]: thread ("thread (0x…)" or its name), then outermost → innermost.
            thread = next((fr for fr in frames[:3] if "thread" in fr.lower() or fr.startswith(("ff-", "Main"))),
                          frames[1] if len(frames) > 1 else "?")
            roles[_role(thread)] += int(count)
            selfs[_frame(frames[-1])] += int(count)
            for fr in {f for f in map(_frame, frames[2:]) if "(ffcore/" in f or "(benchmarks/" in f}:
                incl[fr] += int(count)
            total += int(count)
    return roles, selfs, incl, total


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--mode", default="per_call", choices=("per_call", "batched", "threads"))
    ap.add_argument("--rate", type=float, default=0.0,
                    help="paced: one create() every 1/rate s instead of as fast as possible (tasks arrive one by one)")
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "profile-per-call.txt")
    args = ap.parse_args(argv)
    if shutil.which("py-spy") is None:
        ap.error("py-spy is not installed (pip install py-spy)")
    from ffcore.embedded import EmbeddedValkey

    ours = all_systems(args.concurrency)[0]
    mode = "paced" if args.rate else args.mode
    lines: list[str] = []
    with tempfile.TemporaryDirectory(prefix="ff-profile-") as tmp:
        server = EmbeddedValkey(Path(tmp) / "v", persistent=False).start()
        marks = EmbeddedValkey(Path(tmp) / "m", persistent=False).start()
        try:
            bench = Bench(server.url, marks.url, args.concurrency, 2)
            mon = Monitor(server.url)
            got: list[Path] = []

            def spy(pids: list[int]) -> Callable[[], None]:
                stop = _py_spy(pids, Path(tmp))
                return lambda: got.extend(stop())

            def monitor(pids: list[int]) -> Callable[[], None]:
                mon.start()
                return mon.stop

            counted: dict[str, collections.Counter[str]] = {}

            def count(pids: list[int]) -> Callable[[], None]:
                before = {"workers": _proc_counters(pids), "valkey": _proc_counters([server.proc.pid])}

                def done() -> None:
                    for k, c in (("workers", _proc_counters(pids)), ("valkey", _proc_counters([server.proc.pid]))):
                        counted[k] = c - before[k]

                return done

            runs = {}
            # One observer per run: MONITOR slows the server (and so changes how tasks batch), py-spy the workers.
            for what, observe in (("plain", count), ("py-spy", spy), ("MONITOR", monitor)):
                progress(f"{what} run")
                runs[what] = bench.run(ours, mode, args.n, args.rate or 100.0, observe=observe)
                if "error" in runs[what]:
                    raise SystemExit(f"the {what} run failed: {runs[what]['error']}")
            roles, selfs, incl, total = _profile(got)
        finally:
            server.stop()
            marks.stop()
    plain = runs["plain"]
    n = args.n
    how = f"one create() every {1000 / args.rate:g} ms" if args.rate else args.mode
    lines += [f"ours, {how}, {n} tasks, ffworker × 2 × {args.concurrency} threads",
              f"plain run: {plain['tasks_per_s']:,.0f} tasks/s; CPU µs/task Valkey {plain['valkey_cpu_us']:.0f}, "
              f"workers {plain['workers_cpu_us']:.0f}, producer {plain['producer_cpu_us']:.0f}; "
              f"{plain['commands_per_task']} commands/task (commandstats)",
              "  " + ", ".join(f"{k} {v:g}" for k, v in plain["commands"].items()),
              *(f"  {k}: user {c['user_s'] * 1e6 / n:.0f} + system {c['system_s'] * 1e6 / n:.0f} µs/task, "
                f"{c['voluntary_ctxt_switches'] / n:.1f} voluntary + {c['nonvoluntary_ctxt_switches'] / n:.1f} "
                "involuntary context switches/task" for k, c in counted.items()),
              f"p50 {plain['p50_ms']:.1f} ms; runs with py-spy {runs['py-spy']['tasks_per_s']:,.0f} tasks/s, "
              f"with MONITOR {runs['MONITOR']['tasks_per_s']:,.0f} tasks/s", "",
              "client calls per task (MONITOR), with the Lua commands per call of each FCALL:"]
    for name, c in mon.calls.most_common():
        lua = mon.lua.get(name)
        per_call = sum(lua.values()) / c if lua else 0
        detail = (f"  {per_call:.1f} Lua calls each: " + ", ".join(f"{k} {v / c:.1f}" for k, v in lua.most_common())
                  if lua else "")
        lines.append(f"  {name:32s} {c / n:6.2f}{detail}")
    lines += ["", f"worker samples holding the GIL, by thread ({total} samples of two processes at 500 Hz):"]
    lines += [f"  {v / total:6.1%}  {k}" for k, v in roles.most_common()]
    lines += ["", "worker samples holding the GIL, by ffcore function (inclusive), top 30:"]
    lines += [f"  {v / total:6.1%}  {k}" for k, v in incl.most_common(30)]
    lines += ["", "worker samples holding the GIL, by function (self), top 30:"]
    lines += [f"  {v / total:6.1%}  {k}" for k, v in selfs.most_common(30)]
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
