"""Scanners: suspension timeout and pending-waitpoint expiry (server.md §5.2 #5 and #6)."""

from __future__ import annotations

from dataclasses import dataclass

from ffcore import events, wake
from ffcore import functions as F

from ..backend import Backend
from ..ids import ExecutionId
from ..keys import ExecKeys, PartitionKeys
from ..reads import core_refs_many, text
from .base import Scanner


@dataclass
class SuspensionTimeoutScanner(Scanner):
    """Due entries of `I:suspension_timeout` -> `ff_expire_suspension`, which applies the suspension's
    timeout behaviour (fail / cancel / expire / auto-resume / escalate) and re-checks that it is due."""

    name: str = "suspension_timeout"

    def scan_partition(self, n: int, now_ms: int) -> int:
        due = self.backend.client.zrangebyscore(PartitionKeys(n).suspension_timeout, "-inf", now_ms, start=0,
                                                num=self.batch, withscores=True)
        if not due:
            return 0
        eks = [ExecKeys(text(eid)) for eid, _ in due]
        refs = core_refs_many(self.backend, eks)
        replies = self.backend.call_many([F.expire_suspension(k, r) for k, r in zip(eks, refs, strict=True)])
        # Acted = a behaviour was applied ({behavior, public_state}); not_yet_due / *_cleaned are no-ops.
        acted = [k.eid for k, r in zip(eks, replies, strict=True) if isinstance(r, F.Reply) and len(r.fields) >= 2]
        self.note_due(now_ms, [s for (_, s), r in zip(due, replies, strict=True)
                               if not isinstance(r, F.Reply) or len(r.fields) >= 2])
        events.publish(self.backend, ids=acted)  # a hint for live pages (buffered)
        # Auto-resumed executions are eligible again: idle workers of their lanes claim them at once.
        resumed = {ref.lane for ref, r in zip(refs, replies, strict=True)
                   if isinstance(r, F.Reply) and r.fields[1:2] == ["waiting"]}
        wake.announce(self.backend, {lane: [n] for lane in resumed})
        return len(acted)


@dataclass
class PendingWaitpointExpiryScanner(Scanner):
    """Due entries of `I:pending_waitpoint_expiry` (waitpoint ids) -> `ff_close_waitpoint` reason
    `never_committed`: a pending waitpoint nobody suspended on in time."""

    name: str = "pending_waitpoint_expiry"

    def scan_partition(self, n: int, now_ms: int) -> int:
        ix = PartitionKeys(n)
        due = self.backend.client.zrangebyscore(ix.pending_waitpoint_expiry, "-inf", now_ms, start=0,
                                                num=self.batch, withscores=True)
        if not due:
            return 0
        wids = [text(w) for w, _ in due]
        pipe = self.backend.client.pipeline(transaction=False)
        for w in wids:
            pipe.hget(ix.waitpoint(w), "execution_id")
        owners = [_exec_keys(text(e)) for e in pipe.execute()]
        replies = self.backend.call_many([F.close_waitpoint(ix, w, execution=o, reason="never_committed")
                                          for w, o in zip(wids, owners, strict=True)])
        stale = [w for w, r in zip(wids, replies, strict=True)
                 if not isinstance(r, F.Reply) and getattr(r, "code", "") == "waitpoint_not_found"]
        if stale:  # the waitpoint record is gone (e.g. retention): drop the dangling index entry
            self.backend.client.zrem(ix.pending_waitpoint_expiry, *stale)
        # Due = closed by this pass (or the call failed); a waitpoint already committed or gone is no lag.
        self.note_due(now_ms, [s for (_, s), r in zip(due, replies, strict=True)
                               if (isinstance(r, F.Reply) and not r.fields)
                               or (not isinstance(r, F.Reply)
                                   and getattr(r, "code", "") not in ("waitpoint_not_found", "waitpoint_not_open"))])
        return sum(1 for r in replies if isinstance(r, F.Reply) and not r.fields)


def _exec_keys(eid: str) -> ExecKeys | None:
    try:
        return ExecKeys(ExecutionId(eid))
    except ValueError:
        return None


def scanners(backend: Backend) -> list[Scanner]:
    """The scanners of this area, configured from backend.settings."""
    s = backend.settings.scanners
    return [
        SuspensionTimeoutScanner(backend, interval_ms=s.suspension_timeout_interval_ms, batch=s.batch),
        PendingWaitpointExpiryScanner(backend, interval_ms=s.pending_waitpoint_interval_ms, batch=s.batch),
    ]
