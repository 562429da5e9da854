"""S1 and S5 for FlowFabric and the four peers: each system's worker CLI (benchmarks/systems.py) and a
producer process of its own (benchmarks/producer.py) on one Valkey, flushed in between; every task runs
the same body (benchmarks/recorder.py: one RPUSH of its start time to a second Valkey, the marks server).

S1: workers running, N tasks submitted as fast as the client allows; tasks/s = N / (last task ran − first
submit), submit→ran p50/p95, and what the run cost per task: CPU of the measured Valkey (INFO cpu), of the
worker processes (their whole process sessions, /proc) and of the producer (its own process_time over the
submit window), and the measured Valkey's commands per task (INFO commandstats: commands called from Lua
count too, as the server runs them).
S5: one task every 10 ms (100 tasks/s offered), pick-up latency submit → handler start p50/p95.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

from benchmarks import meter
from benchmarks.common import REPO, cpu_ticks, percentile, progress, steal_percent
from benchmarks.recorder import read_marks, redis_url
from benchmarks.systems import System

MARKS = "bench:marks"
#: Called with the worker pids before a run's timed part; returns what to call after it.
Observer = Callable[[list[int]], Callable[[], None]]
#: Worker sessions alive now: stopped on the way out whatever happens (atexit), never left behind.
_live: set[int] = set()


class RunError(Exception):
    pass


def _stop_sessions(sessions: set[int], grace_s: float = 10.0) -> None:
    """SIGTERM every process of the sessions, then SIGKILL what is left after `grace_s`."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        pids = meter.session_pids(sessions)
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + wait_s
        while meter.session_pids(sessions) and time.monotonic() < deadline:
            time.sleep(0.1)
    _live.difference_update(sessions)


atexit.register(lambda: _stop_sessions(set(_live), grace_s=2.0))


class Bench:
    """The servers of S1 / S5: `url` is measured, `marks_url` takes the marks and the harness's polling.

    `url` may be a cluster's (valkey+cluster://); `node_urls` then names every node, and a run's Valkey CPU
    and commands are summed over them (one server: `url` itself)."""

    def __init__(self, url: str, marks_url: str, concurrency: int, processes: int,
                 node_urls: list[str] | None = None) -> None:
        self.url, self.marks_url = url, marks_url
        self.concurrency, self.processes = concurrency, processes
        self.nodes = [redis.Redis.from_url(redis_url(u)) for u in node_urls or [url]]
        self.marks = redis.Redis.from_url(redis_url(marks_url))

    def _env(self, data_dir: str) -> dict[str, str]:
        return {**os.environ, "BENCH_URL": self.url, "BENCH_MARKS_URL": self.marks_url, "BENCH_KEY": MARKS,
                "FF_VALKEY_URL": self.url, "FF_DATA_DIR": data_dir, "DJANGO_SECRET_KEY": "bench",
                "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}

    def _reset(self) -> None:
        from ffcore.connection import ensure_partition_config, make_client
        from ffcore.settings import Settings

        for node in self.nodes:
            node.flushall()
        self.marks.flushall()
        client = make_client(self.url)  # a cluster client on a cluster: the config key's slot is on one node
        try:
            ensure_partition_config(client, Settings.from_url(self.url).partitions)
        finally:
            client.close()

    def run(self, system: System, mode: str, n: int, rate: float = 100.0,
            observe: Observer | None = None) -> dict[str, Any]:
        """One timed run: the system's workers and a producer in `mode`; a dict of figures or {"error"}.
        `observe(worker pids)` is called just before the timed part and returns what to call after it
        (benchmarks.profile_per_call attaches its profilers there)."""
        self._reset()
        with tempfile.TemporaryDirectory(prefix="ff-bench-run-") as tmp:
            env = self._env(tmp)
            sessions: set[int] = set()
            leaders: list[subprocess.Popen[bytes]] = []
            logs: list[Path] = []
            producer: subprocess.Popen[str] | None = None
            try:
                for k, argv in enumerate(system.commands(self.url, self.processes, self.concurrency)):
                    logs.append(Path(tmp) / f"worker-{k}.log")
                    with logs[-1].open("wb") as log:
                        p = subprocess.Popen(argv, cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                             stderr=subprocess.STDOUT, start_new_session=True)
                    leaders.append(p)
                    sessions.add(p.pid)
                    _live.add(p.pid)
                logs.append(Path(tmp) / "producer.log")
                with logs[-1].open("wb") as log:
                    producer = subprocess.Popen(
                        [sys.executable, "-m", "benchmarks.producer", "--client", system.client, "--mode", mode,
                         "--n", str(n), "--rate", str(rate)], cwd=REPO, env=env, stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE, stderr=log, text=True)
                return self._timed(system, producer, sessions, n, observe)
            except RunError as e:
                tails = [f"{p.stem}: " + " | ".join(t) for p in logs if (t := _tail(p))]
                progress(f"{system.name} {mode}: {e}")
                return {"error": " ".join([str(e), *(f"({t})" for t in tails)])}
            finally:
                if producer is not None and producer.poll() is None:
                    producer.kill()
                    producer.wait()
                _stop_sessions(sessions)
                for p in leaders:  # reap them (their children are reaped by them or by init)
                    p.wait()

    def _timed(self, system: System, producer: subprocess.Popen[str], sessions: set[int], n: int,
               observe: Observer | None) -> dict[str, Any]:
        assert producer.stdin is not None and producer.stdout is not None
        if _readline(producer, 180) != "READY":
            raise RunError("the producer's warm-up task did not run within 180 s")
        if not meter.session_pids(sessions):
            raise RunError("the workers exited")
        _settle(sessions)
        done = observe(meter.session_pids(sessions)) if observe else None
        ticks, srv0, cpu0 = cpu_ticks(), meter.servers_snapshot(self.nodes), meter.session_cpu_s(sessions)
        producer.stdin.write("GO\n")
        producer.stdin.flush()
        line = _readline(producer, max(300.0, n / 20))
        if not line.startswith("{"):
            raise RunError("the producer failed")
        sent = json.loads(line)
        self._wait_marks(n, system.name, sessions)
        cpu1, srv1 = meter.session_cpu_s(sessions), meter.servers_snapshot(self.nodes)
        if done is not None:
            done()
        marks = read_marks(self.marks, MARKS)
        missing = [i for i in range(n) if i not in marks]
        if missing:
            raise RunError(f"{len(missing)} tasks never ran")
        lat = sorted((marks[i] - sent["submitted"][i]) * 1000 for i in range(n))
        valkey_s, calls = meter.server_delta(srv0, srv1)
        per_task = {k: round(v / n, 2) for k, v in sorted(calls.items(), key=lambda kv: -kv[1])}
        return {"tasks_per_s": n / (max(marks.values()) - sent["t0"]), "p50_ms": percentile(lat, 50),
                "p95_ms": percentile(lat, 95), "submit_per_s": n / (sent["t1"] - sent["t0"]), "n": n,
                "valkey_cpu_us": 1e6 * valkey_s / n, "workers_cpu_us": 1e6 * (cpu1 - cpu0) / n,
                "producer_cpu_us": 1e6 * sent["cpu_s"] / n, "commands_per_task": round(sum(calls.values()) / n, 1),
                "commands": per_task, "steal_percent": steal_percent(ticks, cpu_ticks()), "setup": system.setup}

    def _wait_marks(self, n: int, label: str, sessions: set[int], stall_s: float = 60.0) -> None:
        last, last_change = -1, time.monotonic()
        while (got := int(self.marks.llen(MARKS))) < n:
            if got != last:
                last, last_change = got, time.monotonic()
            elif time.monotonic() - last_change > stall_s:
                raise RunError(f"only {got} of {n} tasks ran (none for {stall_s:.0f} s)")
            if not meter.session_pids(sessions):
                raise RunError(f"the workers exited after {got} of {n} tasks")
            time.sleep(0.05)
        progress(f"{label}: {n}/{n} ran")

    def s1(self, system: System, mode: str, n: int) -> dict[str, Any]:
        return self.run(system, mode, n)

    def s5(self, system: System, rate: float, seconds: float) -> dict[str, Any]:
        got = self.run(system, "paced", int(rate * seconds), rate)
        if "error" in got:
            return got
        return {"p50_ms": got["p50_ms"], "p95_ms": got["p95_ms"], "n": got["n"], "offered_per_s": rate}


def _readline(p: subprocess.Popen[str], timeout_s: float) -> str:
    """The producer's next stdout line, "" when it exits or `timeout_s` passes first."""
    assert p.stdout is not None
    out: list[str] = []
    t = threading.Thread(target=lambda: out.append(p.stdout.readline() if p.stdout else ""), daemon=True)
    t.start()
    t.join(timeout_s)
    return out[0].strip() if out else ""


def _tail(log: Path, lines: int = 3) -> list[str]:
    try:
        return [x for x in log.read_text(errors="replace").strip().splitlines() if x.strip()][-lines:]
    except OSError:
        return []


#: The worker processes count as started once they use less than this share of one core (over SETTLE_WINDOW_S).
SETTLE_SHARE = 0.10
SETTLE_WINDOW_S = 0.5


def _settle(sessions: set[int], timeout_s: float = 30.0) -> None:
    """Wait until every worker process has finished starting: the warm-up task proved ONE of them is up, and
    another may still be importing its framework — CPU that would land in the timed window (for every system
    alike). Quiet = under SETTLE_SHARE of a core over a window; gives up (and goes on) after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    before = meter.session_cpu_s(sessions)
    while time.monotonic() < deadline:
        time.sleep(SETTLE_WINDOW_S)
        now = meter.session_cpu_s(sessions)
        if now - before < SETTLE_SHARE * SETTLE_WINDOW_S:
            return
        before = now
    progress("workers still busy after the warm-up; timing anyway")
