"""Following an attempt stream from asyncio (the live dashboard): reads, the tail loop, the tailer lock.

One tailer per stream, whichever process runs it: a tailer holds `live_tail_lock` (renewed while it
runs, expiring when its process dies) and keeps going while viewers refresh `live_tail_want`. Each
batch it yields carries `prev`, the id it read after, so a viewer can tell a gap (its own cursor is
older than `prev` → read the missing range) from a duplicate (frame ids ≤ its cursor → drop). Frames
therefore reach every viewer in order, without gaps or duplicates, even if two tailers briefly
overlap or a viewer joins mid-batch.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aredis
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster

from ffcore import keys
from ffcore.connection import _redis_url
from ffcore.keys import ExecKeys
from ffcore.streams.streams import (
    Frame,
    StreamRead,
    check_count,
    closed_from,
    parse_entries,
    queue,
    range_after,
    range_before,
    status_commands,
)

#: How long one XREAD waits before the tailer re-checks the close marker and its viewers.
TAIL_BLOCK_MS = 1_000
#: Frames read per XREAD.
TAIL_COUNT = 500
#: Lock lifetime; renewed every loop (≤ TAIL_BLOCK_MS), so a dead process frees its streams within it.
LOCK_MS = 10_000
#: How long one viewer's "I am watching" lasts; viewers refresh it every few seconds.
WANT_MS = 15_000


def async_client(url: str, *, timeout_s: float = 10.0) -> Any:
    """A redis.asyncio client (cluster-aware) for a valkey/redis URL."""
    plain, cluster = _redis_url(url)
    opts: dict[str, Any] = {"decode_responses": False, "socket_connect_timeout": 3.0, "socket_timeout": timeout_s,
                            "protocol": 2}
    if cluster:
        return AsyncRedisCluster.from_url(plain, **opts)
    return aredis.Redis.from_url(plain, health_check_interval=30, **opts)


@dataclass(frozen=True)
class TailBatch:
    """Frames read after `prev` (exclusive); `closed` set on the last batch of a closed stream."""

    prev: str
    frames: list[Frame]
    closed_at: str = ""
    closed_reason: str = ""


async def read_after(aclient: Any, eid: str, i: int, after: str | None, *, to_id: str = "+",
                     count: int = 1000) -> StreamRead:
    """Frames after `after` (exclusive; None = from the start) up to `to_id`, oldest first, and the close marker."""
    check_count(count)
    k = ExecKeys(eid)
    pipe = aclient.pipeline(transaction=False)
    pipe.xrange(k.stream(i), *range_after(after, to_id), count=count)
    queue(pipe, status_commands(k, i))
    entries, meta, att, cur = await pipe.execute()
    closed_at, reason = closed_from(meta, att, cur, i)
    return StreamRead(parse_entries(entries), closed_at, reason)


async def read_latest(aclient: Any, eid: str, i: int, n: int, *, before: str | None = None) -> StreamRead:
    """The newest `n` frames (older than `before` when given), oldest first, and the close marker."""
    check_count(n)
    k = ExecKeys(eid)
    pipe = aclient.pipeline(transaction=False)
    pipe.xrevrange(k.stream(i), *range_before(before), count=n)
    queue(pipe, status_commands(k, i))
    entries, meta, att, cur = await pipe.execute()
    closed_at, reason = closed_from(meta, att, cur, i)
    return StreamRead(list(reversed(parse_entries(entries))), closed_at, reason)


async def last_id(aclient: Any, eid: str, i: int) -> str:
    """The newest entry id of the stream ("0-0" when empty)."""
    got = await aclient.xrevrange(ExecKeys(eid).stream(i), "+", "-", count=1)
    return got[0][0].decode() if got else "0-0"


async def follow(aclient: Any, conn: Any, eid: str, i: int, start: str, *, block_ms: int = TAIL_BLOCK_MS,
                 count: int = TAIL_COUNT) -> AsyncIterator[TailBatch]:
    """Tail the stream after `start` until it closes, yielding each batch of frames.

    `conn` is a dedicated client: its XREAD BLOCK holds the connection; `aclient` does the short reads.
    The close marker is checked at most once per `block_ms` (closing writes no entry, so an idle XREAD
    only wakes at its timeout); each check that finds the stream open yields an empty heartbeat batch.
    The last batch carries the close marker, after a final range read so frames appended just before
    the close are not lost. Stop early by breaking out of the loop.
    """
    k = ExecKeys(eid)
    cursor = start
    checked = time.monotonic()
    while True:
        got = await conn.xread({k.stream(i): cursor}, count=count, block=block_ms)
        entries = got[0][1] if isinstance(got, list) and got else (next(iter(got.values()))[0] if got else [])
        frames = parse_entries(entries)
        if frames:
            yield TailBatch(cursor, frames)
            cursor = frames[-1].id
            if time.monotonic() - checked < block_ms / 1000:
                continue
        checked = time.monotonic()
        pipe = aclient.pipeline(transaction=False)
        queue(pipe, status_commands(k, i))
        meta, att, cur = await pipe.execute()
        closed_at, reason = closed_from(meta, att, cur, i)
        if closed_at:
            rest = await read_after(aclient, eid, i, cursor, count=10_000)
            yield TailBatch(cursor, rest.frames, closed_at, reason)
            return
        yield TailBatch(cursor, [])


class TailLock:
    """The one-tailer-per-stream lock: SET NX PX, renewed by its holder, released on exit."""

    def __init__(self, aclient: Any, eid: str, i: int) -> None:
        self.aclient = aclient
        self.key = keys.live_tail_lock(eid, i)
        self.want_key = keys.live_tail_want(eid, i)
        self.token = secrets.token_hex(8)

    async def acquire(self) -> bool:
        return bool(await self.aclient.set(self.key, self.token, nx=True, px=LOCK_MS))

    async def renew(self) -> bool:
        """Extend the lock if it is still ours (GET then PEXPIRE: a lost race only means a short overlap,
        which viewers absorb by dropping duplicate ids)."""
        if await self.aclient.get(self.key) != self.token.encode():
            return False
        await self.aclient.pexpire(self.key, LOCK_MS)
        return True

    async def release(self) -> None:
        if await self.aclient.get(self.key) == self.token.encode():
            await self.aclient.delete(self.key)

    async def wanted(self) -> bool:
        return bool(await self.aclient.exists(self.want_key))


async def mark_wanted(aclient: Any, eid: str, i: int) -> None:
    """A viewer is watching stream i (refresh every few seconds while it is)."""
    await aclient.set(keys.live_tail_want(eid, i), b"1", px=WANT_MS)
