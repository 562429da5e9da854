"""Read models of attempt streams: the live tail page, one frame in full, the execution-detail section."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime

from ffcore.backend import Backend
from ffcore.execution.client import Execution
from ffcore.execution.explain import fmt_ms
from ffcore.keys import ExecKeys
from ffcore.reads import text
from ffcore.streams import streams
from ffcore.streams.streams import Frame
from ffcore.upstream.reads_streams import StreamModes, stream_modes

from .sections import detail_section

#: Characters of a frame shown before "show all".
FRAME_CAP = 2_000
#: Frames shown when the page opens and per "load earlier".
PAGE_FRAMES = 200
_SLUG = re.compile(r"[^a-z0-9_-]+")


@dataclass(frozen=True)
class FrameView:
    id: str
    frame_type: str
    type_class: str
    time: str
    kind: str  # "text" | "hex" | "empty"
    body: str
    size: int
    truncated: bool
    source: str
    correlation_id: str


def frame_view(f: Frame, cap: int | None = FRAME_CAP) -> FrameView:
    """How a frame is shown: text (capped) or a hex preview; the template escapes every field."""
    size = len(f.payload)
    try:
        body = f.payload.decode("utf-8")
        kind = "text" if body else "empty"
    except UnicodeDecodeError:
        shown = f.payload[: (cap or size) // 2 if cap else size]
        body, kind = shown.hex(" "), "hex"
        return FrameView(f.id, f.frame_type, _slug(f.frame_type), _time(f.ts), kind, body, size,
                         len(shown) < size, f.source, f.correlation_id)
    truncated = cap is not None and len(body) > cap
    return FrameView(f.id, f.frame_type, _slug(f.frame_type), _time(f.ts), kind, body[:cap] if truncated else body,
                     size, truncated, f.source, f.correlation_id)


def _slug(frame_type: str) -> str:
    return _SLUG.sub("-", frame_type.lower())[:32] or "none"


def _time(ts: str) -> str:
    """A frame's time of day with milliseconds (UTC); a non-numeric ts is shown as given."""
    if not ts.isdigit() or not 0 < int(ts) < 10**14:
        return ts[:30]
    v = int(ts)
    return datetime.fromtimestamp(v / 1000, tz=UTC).strftime("%H:%M:%S.") + f"{v % 1000:03d}"


@dataclass
class StreamPage:
    execution_id: str
    attempt: int
    attempts: list[int]
    frames: list[FrameView]
    closed_at: str
    closed_reason: str
    info: dict[str, str] = field(default_factory=dict)
    first_id: str = ""
    cursor: str = "0-0"
    has_earlier: bool = False
    #: Upstream mode: the stream's mode, summary document and expiry (ffcore/upstream/reads_streams.py).
    modes: StreamModes | None = None


def stream_page(backend: Backend, eid: str, attempt: int, *, before: str | None = None,
                n: int = PAGE_FRAMES) -> StreamPage | None:
    """The newest `n` frames (or the `n` before `before`), or None when the execution does not exist."""
    k = ExecKeys(eid)
    pipe = backend.client.pipeline(transaction=False)
    pipe.exists(k.core)
    pipe.zrange(k.attempts, 0, -1)
    exists, attempts = pipe.execute()
    if not exists:
        return None
    got = streams.read_latest(backend, eid, attempt, n + 1, before=before)
    frames = got.frames[-n:]
    info = streams.stream_info(backend, eid, attempt)
    modes = stream_modes(backend, eid, attempt) if backend.upstream is not None else None
    return StreamPage(eid, attempt, sorted(int(text(a)) for a in attempts), [frame_view(f) for f in frames],
                      got.closed_at, got.closed_reason, info, frames[0].id if frames else "",
                      frames[-1].id if frames else "0-0", len(got.frames) > n, modes)


def full_frame(backend: Backend, eid: str, attempt: int, frame_id: str) -> FrameView | None:
    got = streams.read_stream(backend, eid, attempt, frame_id, frame_id, 1)
    return frame_view(got.frames[0], cap=None) if got.frames else None


@dataclass(frozen=True)
class AttemptStream:
    attempt: int
    frame_count: int
    total_bytes: int
    last_frame_at: str
    closed_reason: str
    open: bool


@detail_section("stream")
def stream_section(backend: Backend, ex: Execution) -> list[AttemptStream]:
    """Per attempt: how many frames it wrote and whether its stream is still open (newest first)."""
    if not ex.attempts:
        return []
    k = ExecKeys(ex.execution_id)
    pipe = backend.client.pipeline(transaction=False)
    fields = ["frame_count", "total_bytes", "last_frame_at", "closed_at", "closed_reason"]
    for a in ex.attempts:
        pipe.hmget(k.stream_meta(a.index), fields)
    out = []
    for a, vals in zip(ex.attempts, pipe.execute(), strict=True):
        m = dict(zip(fields, map(text, vals), strict=True))
        ended = bool(m["closed_at"] or a.fields.get("ended_at"))
        out.append(AttemptStream(a.index, int(m["frame_count"] or 0), int(m["total_bytes"] or 0),
                                 fmt_ms(m["last_frame_at"]), m["closed_reason"], not ended))
    return list(reversed(out))
