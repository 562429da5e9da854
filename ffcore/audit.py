"""The operator audit trail: one Valkey stream, newest first when read."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ffcore import keys

from .backend import Backend
from .execution import journal
from .reads import decode_map
from .streams.streams import range_before

#: Entries kept (approximate trim).
AUDIT_MAXLEN = 100_000


@dataclass(frozen=True)
class AuditEntry:
    id: str
    actor: str
    action: str
    target: str
    reason: str
    outcome: str
    detail: str
    ts: int


def record(backend: Backend, *, actor: str, action: str, target: str, reason: str, outcome: str,
           detail: str = "") -> str:
    """Append one entry; the stream id carries the server time."""
    entry_id = backend.client.xadd(keys.AUDIT_STREAM, {
        "actor": actor, "action": action, "target": target, "reason": reason, "outcome": outcome, "detail": detail,
    }, maxlen=AUDIT_MAXLEN, approximate=True)
    _mirror(backend, [{"actor": actor, "action": action, "target": target, "reason": reason, "outcome": outcome,
                       "detail": detail}])
    return entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)


def recent(backend: Backend, *, before: str | None = None, count: int = 50) -> list[AuditEntry]:
    """Newest first; `before` is an exclusive stream id for paging."""
    out = []
    for eid, raw in backend.client.xrevrange(keys.AUDIT_STREAM, *range_before(before), count=count):
        sid = eid.decode() if isinstance(eid, bytes) else str(eid)
        f = decode_map(raw)
        out.append(AuditEntry(sid, f.get("actor", ""), f.get("action", ""), f.get("target", ""), f.get("reason", ""),
                              f.get("outcome", ""), f.get("detail", ""), int(sid.split("-")[0])))
    return out


def record_many(backend: Backend, entries: list[dict[str, str]]) -> None:
    """Append several entries (actor, action, target, reason, outcome, detail) in one pipeline."""
    pipe = backend.client.pipeline(transaction=False)
    for e in entries:
        pipe.xadd(keys.AUDIT_STREAM, e, maxlen=AUDIT_MAXLEN, approximate=True)
    pipe.execute()
    _mirror(backend, entries)


def _mirror(backend: Backend, entries: list[dict[str, str]]) -> None:
    """Applied entries about an execution also go to its journal: its History then reads them without scanning
    the global stream. A refusal changed nothing, so it leaves the execution's keys as they were."""
    notes = []
    for e in entries:
        if e.get("outcome") != "ok":
            continue
        eid = journal.execution_target(e.get("target", ""))
        if eid is not None:
            notes.append((str(eid), "operator", {k: v for k, v in e.items() if k != "target" and v}))
    journal.note_many(backend, notes)


# ------------------------------------------------------------------ the audit page: filters and bulk groups
#: A bulk job's per-execution entries carry this detail (dashboard actions write it).
_JOB_DETAIL = re.compile(r"^job ([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\Z")
#: Entries read per round trip, and at most per page request (older entries are one "Older" click away).
SCAN_BATCH = 1000
SCAN_CAP = 20_000


@dataclass(frozen=True)
class AuditFilter:
    """Exact actor / action, a substring of the target, and a time window (ms, inclusive)."""

    actor: str = ""
    action: str = ""
    target: str = ""
    since_ms: int | None = None
    until_ms: int | None = None

    def keeps(self, e: AuditEntry) -> bool:
        return ((not self.actor or e.actor == self.actor) and (not self.action or e.action == self.action)
                and (not self.target or self.target in e.target))


@dataclass
class BulkGroup:
    """Every entry of one bulk job, shown as one row: count, outcome summary, the job's page."""

    job: str
    action: str
    actor: str
    reason: str
    ts: int
    first_ts: int
    count: int = 0
    ok: int = 0
    refused: dict[str, int] = field(default_factory=dict)

    def add(self, e: AuditEntry) -> None:
        self.count += 1
        self.first_ts = e.ts
        if e.outcome == "ok":
            self.ok += 1
        else:
            code = e.outcome.removeprefix("refused: ")
            self.refused[code] = self.refused.get(code, 0) + 1

    @property
    def summary(self) -> str:
        parts = [f"{self.ok} ok"] + [f"{n} {code.replace('_', ' ')}" for code, n in sorted(
            self.refused.items(), key=lambda kv: -kv[1])]
        return ", ".join(parts)


@dataclass
class AuditPage:
    rows: list[AuditEntry | BulkGroup]
    #: Exclusive stream id to continue from ("" when the stream is exhausted).
    next_before: str
    scanned: int = 0


def job_of(e: AuditEntry) -> str:
    """The bulk job an entry belongs to, or ""."""
    if not e.action.startswith("bulk_"):
        return ""
    m = _JOB_DETAIL.match(e.detail)
    return m.group(1) if m else ""


def page(backend: Backend, f: AuditFilter, *, before: str | None = None, count: int = 50,
         scan_cap: int = SCAN_CAP) -> AuditPage:
    """Newest first, filtered, a bulk job's entries folded into one row (unless the target filter asks for
    single executions: then each matching entry is its own row). Reads the stream in batches from `before`
    (or the window's end) and stops at `count` rows, at `scan_cap` entries read, or at the window's start;
    once the page is full it still reads on while entries belong to a job on the page, so a job is one row."""
    # `(0-0` is an empty page (Valkey rejects it as a bound); an out-of-range id is InvalidInput.
    hi = range_before(before)[0] if before else (str(f.until_ms) if f.until_ms is not None else "+")
    lo = str(f.since_ms) if f.since_ms is not None else "-"
    rows: list[AuditEntry | BulkGroup] = []
    groups: dict[str, BulkGroup] = {}
    fold = not f.target
    scanned, last = 0, ""
    full = False
    while scanned < scan_cap:
        batch = backend.client.xrevrange(keys.AUDIT_STREAM, hi, lo, count=SCAN_BATCH)
        if not batch:
            return AuditPage(rows, "", scanned)
        for sid_raw, raw in batch:
            sid = sid_raw.decode() if isinstance(sid_raw, bytes) else str(sid_raw)
            e = _entry(sid, raw)
            job = job_of(e) if fold else ""
            if full and not (job and job in groups):
                return AuditPage(rows, last, scanned)
            scanned += 1
            last = sid
            if not f.keeps(e):
                continue
            if job:
                g = groups.get(job)
                if g is None:
                    g = groups[job] = BulkGroup(job, e.action, e.actor, e.reason, e.ts, e.ts)
                    rows.append(g)
                g.add(e)
            else:
                rows.append(e)
            full = len(rows) >= count
        if len(batch) < SCAN_BATCH:
            return AuditPage(rows, "", scanned)
        hi = f"({last}"
    return AuditPage(rows, last, scanned)


def _entry(sid: str, raw: dict[Any, Any]) -> AuditEntry:
    f = decode_map(raw)
    return AuditEntry(sid, f.get("actor", ""), f.get("action", ""), f.get("target", ""), f.get("reason", ""),
                      f.get("outcome", ""), f.get("detail", ""), int(sid.split("-")[0]))
