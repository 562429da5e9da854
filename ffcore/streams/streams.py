"""Attempt output streams: range reads, reads of the newest frames, and the blocking tail.

Frames are appended by the lease holder (`ClaimedTask.append_frame`, FCALL `ff_append_frame`). Readers
need no lease. A tail is `XREAD BLOCK` (blocking commands are not allowed inside functions), which
occupies its connection for the whole block: `StreamPool` hands every tail its own connection from a
bounded pool and refuses at once (`ConcurrencyLimit`) when every permit is taken (server.md §2.4).

A stream is *closed* when its meta hash says so (the library closes it when the attempt ends), or —
for an attempt that never appended a frame and so has no meta — when the attempt record has ended or
a newer attempt has started.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ffcore import functions as F
from ffcore.backend import Backend
from ffcore.connection import Client, make_client
from ffcore.errors import FFError, InvalidInput
from ffcore.keys import ExecKeys
from ffcore.reads import text

#: worker-sdk §0: longest block of one tail call.
MAX_TAIL_BLOCK_MS = 30_000
STREAM_READ_HARD_CAP = F.STREAM_READ_HARD_CAP

_ID = re.compile(r"^\d{1,20}(-\d{1,20})?\Z", re.ASCII)
#: Both parts of a stream id are unsigned 64-bit integers; 20 digits alone allow larger ones.
MAX_ID_PART = 2**64 - 1
#: XRANGE start/end that select nothing (start after end); reversed for XREVRANGE.
EMPTY_RANGE = ("+", "-")
_ENDED = {"ended_success": "attempt_success", "ended_failure": "attempt_failure",
          "ended_cancelled": "attempt_cancelled"}


class ConcurrencyLimit(FFError):
    """Every stream permit is taken; retry with backoff (HTTP 429 at the API)."""


@dataclass(frozen=True)
class Frame:
    id: str
    frame_type: str
    ts: str
    payload: bytes
    encoding: str = "utf8"
    source: str = ""
    correlation_id: str = ""
    #: The frame's structured metadata (a JSON text), stored apart from its correlation id.
    metadata_json: str = ""

    @property
    def key(self) -> tuple[int, int]:
        return id_key(self.id)


@dataclass(frozen=True)
class StreamRead:
    frames: list[Frame]
    closed_at: str = ""
    closed_reason: str = ""

    @property
    def closed(self) -> bool:
        return bool(self.closed_at)

    @property
    def last_id(self) -> str | None:
        return self.frames[-1].id if self.frames else None


def id_key(entry_id: str) -> tuple[int, int]:
    """A stream entry id as a comparable tuple (`"12-3"` → (12, 3); a bare ms means sequence 0)."""
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


def parse_id(value: str, name: str = "id") -> tuple[int, int]:
    """The one parser of stream ids from outside (pages, REST, tail, sockets, audit paging): `<ms>` or
    `<ms>-<seq>`, each an unsigned 64-bit integer as Valkey stores them; anything else is InvalidInput."""
    if isinstance(value, str) and _ID.match(value):
        key = id_key(value)
        if max(key) <= MAX_ID_PART:
            return key
    raise InvalidInput("invalid_input", [f"{name} must be a stream id like 1700000000000-0 "
                                         f"(two integers up to {MAX_ID_PART})"])


def check_id(value: str, name: str = "id") -> str:
    parse_id(value, name)
    return value


def check_range_id(value: str, name: str = "id") -> str:
    """A range end: `-` (the oldest), `+` (the newest), a stream id, or `(<id>` (exclusive)."""
    if value in ("-", "+"):
        return value
    check_id(value[1:] if value.startswith("(") else value, name)
    return value


def range_bounds(from_id: str, to_id: str) -> tuple[str, str]:
    """Checked XRANGE bounds; `(` after the largest id or before 0-0 (which Valkey rejects) is an empty range."""
    check_range_id(from_id, "from"), check_range_id(to_id, "to")
    if from_id.startswith("(") and parse_id(from_id[1:]) == (MAX_ID_PART, MAX_ID_PART):
        return EMPTY_RANGE
    if to_id.startswith("(") and parse_id(to_id[1:]) == (0, 0):
        return EMPTY_RANGE
    return from_id, to_id


def range_after(after: str | None, to_id: str = "+", name: str = "after") -> tuple[str, str]:
    """XRANGE bounds for the entries after `after` (exclusive; None = from the start) up to `to_id`.
    Valkey rejects `(` before the largest id (nothing can follow it), so that range is spelled empty."""
    if after is None:
        return "-", to_id
    if parse_id(after, name) == (MAX_ID_PART, MAX_ID_PART):
        return EMPTY_RANGE
    return f"({after}", to_id


def range_before(before: str | None, name: str = "before") -> tuple[str, str]:
    """XREVRANGE bounds (high, low) for the entries older than `before` (exclusive; None = the newest).
    Valkey rejects `(0-0` (nothing precedes it), so that range is spelled empty."""
    if before is None:
        return "+", "-"
    if parse_id(before, name) == (0, 0):
        return EMPTY_RANGE[::-1]
    return f"({before}", "-"


def check_count(count_limit: int) -> int:
    ok = isinstance(count_limit, int) and not isinstance(count_limit, bool)
    if not ok or not 1 <= count_limit <= STREAM_READ_HARD_CAP:
        raise InvalidInput("invalid_input", [f"count_limit must be 1..{STREAM_READ_HARD_CAP}"])
    return count_limit


def parse_entries(raw: Sequence[Any] | None) -> list[Frame]:
    """XRANGE/XREVRANGE/XREAD entries `[id, [f1, v1, ...]]` (or `(id, {f: v})` from redis-py) as frames."""
    out = []
    for entry_id, fields in raw or []:
        if isinstance(fields, dict):
            m = {text(k): v for k, v in fields.items()}
        else:
            m = {text(fields[j]): fields[j + 1] for j in range(0, len(fields) - 1, 2)}
        payload = m.get("payload", b"")
        out.append(Frame(text(entry_id), text(m.get("frame_type")), text(m.get("ts")),
                         payload if isinstance(payload, bytes) else text(payload).encode(),
                         text(m.get("encoding")) or "utf8", text(m.get("source")), text(m.get("correlation_id")),
                         text(m.get("metadata_json"))))
    return out


def closed_from(meta: Sequence[Any], attempt: Sequence[Any], current_index: Any, i: int) -> tuple[str, str]:
    """(closed_at, closed_reason) from meta `closed_at, closed_reason`, attempt `ended_at, attempt_state`
    and the execution's `current_attempt_index` (all as HMGET/HGET replies)."""
    closed_at, reason = text(meta[0]), text(meta[1])
    if closed_at:
        return closed_at, reason
    ended_at, state = text(attempt[0]), text(attempt[1])
    if not state:
        return "0", "no_such_attempt"
    if ended_at:
        return ended_at, _ENDED.get(state, state)
    cur = text(current_index)
    if cur and cur.isdigit() and int(cur) > i:
        return "0", "superseded"
    return "", ""


def status_commands(k: ExecKeys, i: int) -> list[tuple[str, Any]]:
    """The three reads `closed_from` needs, for a pipeline (sync or async)."""
    return [("hmget", (k.stream_meta(i), ["closed_at", "closed_reason"])),
            ("hmget", (k.attempt(i), ["ended_at", "attempt_state"])),
            ("hget", (k.core, "current_attempt_index"))]


def queue(pipe: Any, commands: list[tuple[str, Any]]) -> None:
    for name, args in commands:
        getattr(pipe, name)(*args)


# ------------------------------------------------------------------ sync reads (SDK §3.7, server #28)
def read_stream(backend: Backend, eid: str, attempt_index: int, from_id: str = "-", to_id: str = "+",
                count_limit: int = 100) -> StreamRead:
    """Frames from `from_id` to `to_id` inclusive (`(id` excludes), oldest first; no lease needed."""
    check_count(count_limit)
    from_id, to_id = range_bounds(from_id, to_id)
    reply = backend.call(F.read_attempt_stream(ExecKeys(eid), attempt_index, from_id=from_id, to_id=to_id,
                                               count_limit=count_limit))
    return StreamRead(parse_entries(reply.raw[0]), text(reply.raw[1]), text(reply.raw[2]))


def read_latest(backend: Backend, eid: str, attempt_index: int, n: int = 100, *,
                before: str | None = None) -> StreamRead:
    """The newest `n` frames (older than `before` when given), oldest first, with the close marker."""
    check_count(n)
    k = ExecKeys(eid)
    pipe = backend.client.pipeline(transaction=False)
    pipe.xrevrange(k.stream(attempt_index), *range_before(before), count=n)
    queue(pipe, status_commands(k, attempt_index))
    entries, meta, att, cur = pipe.execute()
    closed_at, reason = closed_from(meta, att, cur, attempt_index)
    return StreamRead(list(reversed(parse_entries(entries))), closed_at, reason)


def stream_info(backend: Backend, eid: str, attempt_index: int) -> dict[str, str]:
    """The stream meta hash (`frame_count`, `total_bytes`, `closed_at`…); {} before the first frame."""
    raw = backend.client.hgetall(ExecKeys(eid).stream_meta(attempt_index))
    return {text(a): text(b) for a, b in raw.items()}


# ------------------------------------------------------------------ blocking tail (SDK §3.7, server #29)
def tail_stream(conn: Client, eid: str, attempt_index: int, last_id: str = "0-0", *, block_ms: int = 0,
                count_limit: int = 100) -> StreamRead:
    """Frames after `last_id` (exclusive), waiting up to `block_ms` for the first (0 = do not wait).

    Blocks `conn` for the whole wait: pass a connection no one else uses (`StreamPool.tail` does).
    Empty frames and no close marker mean the wait timed out and the stream is still open.
    """
    check_count(count_limit)
    check_id(last_id, "last_id")
    if not 0 <= block_ms <= MAX_TAIL_BLOCK_MS:
        raise InvalidInput("invalid_input", [f"block_ms must be 0..{MAX_TAIL_BLOCK_MS}"])
    k = ExecKeys(eid)
    got = conn.xread({k.stream(attempt_index): last_id}, count=count_limit, block=block_ms or None)
    pipe = conn.pipeline(transaction=False)
    queue(pipe, status_commands(k, attempt_index))
    meta, att, cur = pipe.execute()
    closed_at, reason = closed_from(meta, att, cur, attempt_index)
    entries = got[0][1] if isinstance(got, list) and got else (next(iter(got.values()))[0] if got else [])
    return StreamRead(parse_entries(entries), closed_at, reason)


class StreamPool:
    """Bounded stream reads and tails: one shared permit pool (try-acquire), tails on their own connections."""

    def __init__(self, backend: Backend, max_concurrent: int = 64) -> None:
        if max_concurrent < 1:
            raise InvalidInput("invalid_input", ["max_concurrent must be > 0"])
        self.backend = backend
        self.max_concurrent = max_concurrent
        self._permits = threading.BoundedSemaphore(max_concurrent)
        self._idle: list[Client] = []
        self._lock = threading.Lock()

    @contextmanager
    def _permit(self) -> Iterator[None]:
        if not self._permits.acquire(blocking=False):
            raise ConcurrencyLimit(f"too many concurrent stream_ops calls (max {self.max_concurrent}); "
                                   "retry with backoff")
        try:
            yield
        finally:
            self._permits.release()

    def read(self, eid: str, attempt_index: int, from_id: str = "-", to_id: str = "+",
             count_limit: int = 100) -> StreamRead:
        with self._permit():
            return read_stream(self.backend, eid, attempt_index, from_id, to_id, count_limit)

    def tail(self, eid: str, attempt_index: int, last_id: str = "0-0", *, block_ms: int = 0,
             count_limit: int = 100) -> StreamRead:
        with self._permit():
            conn = self._take()
            try:
                result = tail_stream(conn, eid, attempt_index, last_id, block_ms=block_ms, count_limit=count_limit)
            except BaseException:
                conn.close()  # the connection's state is unknown after a failed blocking read
                raise
            with self._lock:
                self._idle.append(conn)
            return result

    def _take(self) -> Client:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        # Each tail connection waits at most MAX_TAIL_BLOCK_MS, so its socket timeout leaves room for that.
        url = self.backend.url
        return make_client(url, timeout_s=MAX_TAIL_BLOCK_MS / 1000 + 0.5)

    def close(self) -> None:
        with self._lock:
            for c in self._idle:
                c.close()
            self._idle.clear()
