"""Read models of the Schedules pages (no writes): schedules with their next fire times and latest runs."""

from __future__ import annotations

from dataclasses import dataclass, field

from ffcore.backend import Backend
from ffcore.errors import InvalidId
from ffcore.execution.client import Client
from ffcore.schedules import Run, Schedule

#: How a run is drawn in the history chart: finished well, badly, still going, skipped (overlap), missed.
_BAD = {"failed", "cancelled", "expired", "skipped"}
_OK = {"completed"}


def run_class(r: Run) -> str:
    if r.outcome == "missed":
        return "missed"
    if r.outcome == "skipped":
        return "skip"
    if not r.state:
        return "gone"
    return "ok" if r.state in _OK else "bad" if r.state in _BAD else "running"


def run_outcome(r: Run) -> str:
    """What a history bar's tooltip says after the fire time."""
    if r.outcome == "missed":
        return f"{r.missed} missed"
    if r.outcome == "skipped":
        return "skipped (overlap)"
    return r.state or "gone"


@dataclass(frozen=True)
class Row:
    schedule: Schedule
    upcoming: list[int]
    runs: list[Run]
    #: Oldest first: (run, bar class, outcome words for the tooltip).
    bars: list[tuple[Run, str, str]] = field(default_factory=list)

    @property
    def id(self) -> str:
        return self.schedule.id


def schedules_page(backend: Backend, runs: int = 5) -> tuple[list[Row], int]:
    client = Client(backend)
    now = backend.now_ms()
    rows = [Row(s, client.schedules.upcoming(s, 5, now_ms=now), client.schedules.runs(s.id, runs))
            for s in client.schedules.list()]
    return rows, now


def schedule_page(backend: Backend, schedule_id: str, runs: int = 60) -> tuple[Row | None, int]:
    client = Client(backend)
    now = backend.now_ms()
    try:
        s = client.schedules.get(schedule_id)
    except InvalidId:
        return None, now
    if s is None:
        return None, now
    history = client.schedules.runs(s.id, runs)
    return Row(s, client.schedules.upcoming(s, 5, now_ms=now), history,
               [(r, run_class(r), run_outcome(r)) for r in reversed(history)]), now
