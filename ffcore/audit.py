"""The operator audit trail: one Valkey stream, newest first when read."""

from __future__ import annotations

from dataclasses import dataclass

from ffcore import keys

from .backend import Backend
from .reads import decode_map

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
    return entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)


def recent(backend: Backend, *, before: str | None = None, count: int = 50) -> list[AuditEntry]:
    """Newest first; `before` is an exclusive stream id for paging."""
    hi = f"({before}" if before else "+"
    out = []
    for eid, raw in backend.client.xrevrange(keys.AUDIT_STREAM, hi, "-", count=count):
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
