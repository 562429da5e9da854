"""What a run cost: CPU seconds of process sessions (from /proc, no psutil needed) and of a Valkey server
(INFO cpu), and the server's commands by name (INFO commandstats), as snapshots to subtract."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

_TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def session_cpu_s(sessions: set[int]) -> float:
    """CPU seconds (user + system) of every live process in `sessions`, plus what each has collected from
    its reaped children (RQ's fork per job, Celery's pool): the tree's CPU so far."""
    total = 0
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            # Fields after the parenthesised command: state ppid pgrp session ... utime(14) stime cutime cstime.
            f = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # exited meanwhile
        if int(f[3]) in sessions:
            total += int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])
    return total * _TICK_S


def session_pids(sessions: set[int]) -> list[int]:
    """The running (not zombie) processes of `sessions`."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                f = (d / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if f[0] != "Z" and int(f[3]) in sessions:
                out.append(int(d.name))
    return out


def server_snapshot(r: Any) -> dict[str, Any]:
    """Valkey's own CPU seconds (all its threads) and calls per command so far."""
    cpu = r.info("cpu")
    stats = r.info("commandstats")
    calls = {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()}
    return {"cpu_s": float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"]), "calls": calls}


def server_delta(before: dict[str, Any], after: dict[str, Any]) -> tuple[float, dict[str, int]]:
    """CPU seconds and calls per command between two snapshots, without the harness's own INFO calls."""
    calls = {k: n - before["calls"].get(k, 0) for k, n in after["calls"].items() if k != "info"}
    return after["cpu_s"] - before["cpu_s"], {k: n for k, n in calls.items() if n > 0}


def servers_snapshot(clients: list[Any]) -> dict[str, Any]:
    """server_snapshot summed over several servers (the nodes of a cluster)."""
    cpu, calls = 0.0, {}
    for r in clients:
        one = server_snapshot(r)
        cpu += one["cpu_s"]
        for k, n in one["calls"].items():
            calls[k] = calls.get(k, 0) + n
    return {"cpu_s": cpu, "calls": calls}
