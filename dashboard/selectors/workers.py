"""Read model: the Workers page — live, stale (heartbeat late, leases still listed with their expiry) and gone."""

from __future__ import annotations

from dataclasses import dataclass

from ffcore.backend import Backend
from ffcore.worker.heartbeat import WorkerInfo, lease_expiries
from ffcore.workers import roster


@dataclass(frozen=True)
class WorkerRow:
    info: WorkerInfo
    status: str
    #: (execution id, lease expiry ms or 0) per lease the worker last reported.
    leases: list[tuple[str, int]]

    @property
    def stale_since(self) -> int:
        return self.info.stale_since()


@dataclass(frozen=True)
class WorkersView:
    rows: list[WorkerRow]
    now_ms: int

    def count(self, status: str) -> int:
        return sum(r.status == status for r in self.rows)

    @property
    def live(self) -> int:
        return self.count("live")

    @property
    def stale(self) -> int:
        return self.count("stale")

    @property
    def gone(self) -> int:
        return self.count("gone")


def workers_view(backend: Backend) -> WorkersView:
    now, ws = roster(backend)
    expiry = lease_expiries(backend, [e for w in ws for e in w.leases])
    return WorkersView([WorkerRow(w, w.status(now), [(e, expiry.get(e, 0)) for e in w.leases]) for w in ws], now)
