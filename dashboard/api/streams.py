"""Attempt output streams: range read and blocking tail (server.md §3.2 rows 13, 14; §2.4).

Both share one bounded permit pool (`FF_MAX_CONCURRENT_STREAM_OPS`, default 64, try-acquire: a full
pool answers 429 at once, never queues). Each tail blocks on its own pooled connection, so a 30 s
tail never stalls the main connection's FCALLs.
"""

from __future__ import annotations

import base64
import contextlib
import os
import threading
from typing import Any

from django.http import HttpRequest
from ninja import Query, Router, Schema
from pydantic import Field, field_validator

from ffcore.backend import Backend
from ffcore.errors import InvalidInput
from ffcore.ids import ExecutionId
from ffcore.streams.streams import MAX_ID_PART, MAX_TAIL_BLOCK_MS, StreamPool, StreamRead, check_id, check_range_id

from ..backend import get_backend
from .schemas import Error

router = Router(tags=["streams"])

#: REST bound on frames per call (the library allows 10,000; server.md §7.4).
MAX_LIMIT = 1000
#: v0.13's public cursor words (its REST refuses the bare markers; ours accepts both forms).
_V013_MARKERS = {"start": "-", "end": "+"}
_pool_lock = threading.Lock()
_pool: tuple[Backend, StreamPool] | None = None


def stream_pool() -> StreamPool:
    """The process's permit pool, rebuilt when the dashboard's backend changes (tests swap it)."""
    global _pool
    backend = get_backend()
    with _pool_lock:
        if _pool is None or _pool[0] is not backend:
            if _pool is not None:
                _pool[1].close()
            raw = os.environ.get("FF_MAX_CONCURRENT_STREAM_OPS", "").strip()
            size = int(raw) if raw.isdigit() and int(raw) > 0 else 64
            _pool = (backend, StreamPool(backend, size))
        return _pool[1]


class FrameOut(Schema):
    id: str
    fields: dict[str, str] = Field(description="The entry's fields; `payload` only when it is valid UTF-8")
    payload_b64: str = Field(description="The payload bytes, base64 (always exact)")


class StreamOut(Schema):
    frames: list[FrameOut]
    count: int
    closed_at: int | None = None
    closed_reason: str | None = None


class ReadQuery(Schema):
    from_: str = Field(default="-", alias="from", max_length=42,
                       description="`start` (v0.13) or `-`, `<ms>` or `<ms>-<seq>`")
    to: str = Field(default="+", max_length=42, description="`end` (v0.13) or `+`, `<ms>` or `<ms>-<seq>`")
    limit: int = Field(default=100, ge=1, le=MAX_LIMIT)

    @field_validator("from_", "to")
    @classmethod
    def _id(cls, v: str) -> str:
        v = _V013_MARKERS.get(v, v)  # v0.13's cursor words, read as the markers they stand for
        try:
            return check_range_id(v)
        except InvalidInput:
            raise ValueError("must be 'start', 'end', '-', '+', '<ms>' or '<ms>-<seq>' "
                             f"(each up to {MAX_ID_PART})") from None


class TailQuery(Schema):
    after: str = Field(default="0-0", max_length=42, description="Exclusive; a concrete `<ms>-<seq>` id")
    block_ms: int = Field(default=0, ge=0, le=MAX_TAIL_BLOCK_MS)
    limit: int = Field(default=50, ge=1, le=MAX_LIMIT)

    @field_validator("after")
    @classmethod
    def _id(cls, v: str) -> str:
        try:
            return check_id(v)
        except InvalidInput:
            raise ValueError(f"must be a concrete stream id '<ms>' or '<ms>-<seq>' (each up to {MAX_ID_PART}; "
                             "'-' and '+' are not allowed)") from None


def _out(r: StreamRead) -> dict[str, Any]:
    frames = []
    for f in r.frames:
        fields = {"frame_type": f.frame_type, "ts": f.ts, "encoding": f.encoding}
        if f.source:
            fields["source"] = f.source
        if f.correlation_id:
            fields["correlation_id"] = f.correlation_id
        if f.metadata_json:
            fields["metadata_json"] = f.metadata_json
        with contextlib.suppress(UnicodeDecodeError):  # binary: only payload_b64 carries it
            fields["payload"] = f.payload.decode("utf-8")
        frames.append({"id": f.id, "fields": dict(sorted(fields.items())),
                       "payload_b64": base64.b64encode(f.payload).decode()})
    out: dict[str, Any] = {"frames": frames, "count": len(frames)}
    if r.closed_at:
        out["closed_at"] = int(r.closed_at) if r.closed_at.isdigit() else 0
        out["closed_reason"] = r.closed_reason
    return out


@router.get("/executions/{execution_id}/attempts/{attempt_index}/stream",
            response={200: StreamOut, 400: Error, 422: Error, 429: Error}, exclude_none=True)
def read_stream(request: HttpRequest, execution_id: str, attempt_index: int, q: Query[ReadQuery]) -> dict[str, Any]:
    """Frames from `from` to `to` (inclusive), oldest first, at most `limit` (1..1000)."""
    eid = ExecutionId(execution_id)
    if not 0 <= attempt_index <= 2**31:
        raise ValueError("attempt_index must be within 0..2^31")
    return _out(stream_pool().read(eid, attempt_index, q.from_, q.to, q.limit))


@router.get("/executions/{execution_id}/attempts/{attempt_index}/stream/tail",
            response={200: StreamOut, 400: Error, 422: Error, 429: Error}, exclude_none=True)
def tail_stream(request: HttpRequest, execution_id: str, attempt_index: int, q: Query[TailQuery]) -> dict[str, Any]:
    """Frames after `after`, waiting up to `block_ms` (≤ 30,000) for the first. Empty frames and no
    `closed_at` mean the wait timed out with the stream still open."""
    eid = ExecutionId(execution_id)
    if not 0 <= attempt_index <= 2**31:
        raise ValueError("attempt_index must be within 0..2^31")
    pool = stream_pool()
    got = pool.tail(eid, attempt_index, q.after, block_ms=0, count_limit=q.limit)
    if got.frames or got.closed or not q.block_ms:
        return _out(got)  # a closed (or never-started) stream answers at once instead of blocking
    return _out(pool.tail(eid, attempt_index, q.after, block_ms=q.block_ms, count_limit=q.limit))
