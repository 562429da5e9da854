"""The worker roster the pages show: our registry (ffcore.worker.heartbeat), or on an upstream v0.14+ deployment
its per-namespace registry (ffcore.upstream.reads_workers) — chosen here, so neither reader imports the other."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .upstream import reads_workers
from .worker import heartbeat
from .worker.heartbeat import WorkerInfo

if TYPE_CHECKING:
    from .backend import Backend


def roster(backend: Backend) -> tuple[int, list[WorkerInfo]]:
    """The server's now (ms) and every registered worker, live first, then by newest heartbeat."""
    if backend.upstream is not None and backend.upstream.per_namespace_workers:
        return reads_workers.roster(backend)
    return heartbeat.roster(backend)


def list_workers(backend: Backend) -> list[WorkerInfo]:
    """Live workers (heartbeat on time), newest heartbeat first."""
    now, ws = roster(backend)
    return [w for w in ws if w.status(now) == "live"]
