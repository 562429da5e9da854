"""Read model: two attempts of one execution side by side — facts and output stream, changes marked."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from ffcore.backend import Backend
from ffcore.execution import tracebacks
from ffcore.execution.client import Attempt, Client, Execution
from ffcore.streams import streams

#: Frames of each attempt's stream compared (the oldest ones; the page says when a stream is longer).
DIFF_FRAMES = 500
#: Characters of a frame kept on its diff line.
LINE_CAP = 400

#: (label, attempt field) rows of the facts table; duration is computed.
FACTS = (("type", "attempt_type"), ("state", "attempt_state"), ("worker", "worker_id"),
         ("worker instance", "worker_instance_id"), ("started", "started_at"), ("ended", "ended_at"),
         ("failure reason", "failure_reason"), ("failure category", "failure_category"),
         ("lease epoch", "lease_epoch"))
TIME_FACTS = frozenset({"started_at", "ended_at"})


@dataclass(frozen=True)
class FactRow:
    label: str
    a: str
    b: str
    is_time: bool = False

    @property
    def changed(self) -> bool:
        return self.a != self.b and not self.is_time


@dataclass(frozen=True)
class LineRow:
    """One row of the side-by-side stream: op is equal | replace | delete | insert."""

    op: str
    a: str | None
    b: str | None


@dataclass
class AttemptDiff:
    execution: Execution
    a: Attempt
    b: Attempt
    facts: list[FactRow]
    lines: list[LineRow]
    frames: tuple[int, int]
    more: tuple[bool, bool]
    now_ms: int
    changed_lines: int = 0
    indexes: list[int] = field(default_factory=list)
    #: The tracebacks the two attempts' handlers raised ("" when none was kept).
    tracebacks: tuple[str, str] = ("", "")


def duration_ms(att: Attempt, now_ms: int) -> int | None:
    """How long an attempt ran: start to end, or to now while it runs; None before it started."""
    start = _int(att.fields.get("started_at"))
    if start is None:
        return None
    end = _int(att.fields.get("ended_at")) or now_ms
    return max(0, end - start)


def _int(v: str | None) -> int | None:
    return int(v) if v and v.isdigit() and int(v) > 0 else None


def _lines(backend: Backend, eid: str, index: int) -> tuple[list[str], bool]:
    got = streams.read_stream(backend, eid, index, count_limit=DIFF_FRAMES + 1)
    frames = got.frames[:DIFF_FRAMES]
    out = []
    for f in frames:
        try:
            body = f.payload.decode("utf-8")
        except UnicodeDecodeError:
            body = f.payload[: LINE_CAP // 3].hex(" ")
        body = body.replace("\r", "").replace("\n", "⏎ ")
        out.append(f"[{f.frame_type}] {body[:LINE_CAP]}{'…' if len(body) > LINE_CAP else ''}")
    return out, len(got.frames) > DIFF_FRAMES


def side_by_side(a: list[str], b: list[str]) -> list[LineRow]:
    rows: list[LineRow] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op == "equal":
            rows += [LineRow("equal", x, y) for x, y in zip(a[i1:i2], b[j1:j2], strict=True)]
        elif op == "replace":
            left, right = a[i1:i2], b[j1:j2]
            for k in range(max(len(left), len(right))):
                x, y = (left[k] if k < len(left) else None), (right[k] if k < len(right) else None)
                rows.append(LineRow("replace" if x is not None and y is not None else
                                    "insert" if x is None else "delete", x, y))
        elif op == "delete":
            rows += [LineRow("delete", x, None) for x in a[i1:i2]]
        else:
            rows += [LineRow("insert", None, y) for y in b[j1:j2]]
    return rows


def attempt_diff(backend: Backend, eid: str, a: int, b: int) -> AttemptDiff | None:
    """None when the execution or either attempt does not exist."""
    ex = Client(backend).get_execution(eid)
    if ex is None:
        return None
    by_index = {att.index: att for att in ex.attempts}
    if a not in by_index or b not in by_index:
        return None
    now = backend.now_ms()
    att_a, att_b = by_index[a], by_index[b]
    facts = [FactRow(label, att_a.fields.get(f, ""), att_b.fields.get(f, ""), f in TIME_FACTS) for label, f in FACTS]
    da, db = duration_ms(att_a, now), duration_ms(att_b, now)
    facts.insert(0, FactRow("duration", "" if da is None else str(da), "" if db is None else str(db)))
    la, more_a = _lines(backend, eid, a)
    lb, more_b = _lines(backend, eid, b)
    rows = side_by_side(la, lb)
    tbs = tracebacks.read_many(backend, eid, [a, b])
    return AttemptDiff(ex, att_a, att_b, facts, rows, (len(la), len(lb)), (more_a, more_b), now,
                       sum(r.op != "equal" for r in rows), sorted(by_index), (tbs.get(a, ""), tbs.get(b, "")))
