"""Cross-partition listing: a k-way merge over per-partition index ZSETs with cursor pagination.

Each page reads a few heads from every partition's index in one pipeline, merges them in score
order, refills only partitions whose buffered heads ran out, and reads the row fields of the page in
one more pipeline. Work per page is bounded (partitions x small batch), independent of how many
executions are stored. Cursors are `<score>|<eid>` and exclusive.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .backend import Backend
from .errors import InvalidInput
from .keys import ExecKeys, PartitionKeys, lane_partitions
from .reads import text

ROW_FIELDS = ("execution_id", "namespace", "lane_id", "execution_kind", "public_state", "priority", "created_at",
              "total_attempt_count", "current_worker_id", "current_worker_instance_id", "lease_expires_at",
              "flow_id", "completed_at", "blocking_reason")

#: Public state -> lane index suffixes holding it (admission blocks store `rate_limited` for every reason).
STATE_INDEXES: dict[str, tuple[str, ...]] = {
    "waiting": ("eligible", "blocked:route", "blocked:operator"),
    "delayed": ("delayed",),
    "rate_limited": ("blocked:budget", "blocked:quota", "blocked:route", "blocked:operator"),
    "waiting_children": ("blocked:dependencies",),
    "active": ("active",),
    "suspended": ("suspended",),
    "completed": ("terminal",), "failed": ("terminal",), "cancelled": ("terminal",),
    "expired": ("terminal",), "skipped": ("terminal",),
}


@dataclass(frozen=True)
class Query:
    lane: str | None = None
    state: str | None = None
    kind: str | None = None
    tag: tuple[str, str] | None = None
    cursor: str | None = None
    limit: int = 50


@dataclass
class ListPage:
    rows: list[dict[str, str]]
    next_cursor: str | None
    #: Index entries examined for this page (bounded; shows the cost of post-filters).
    examined: int = 0
    tags: dict[str, dict[str, str]] = field(default_factory=dict)


def parse_cursor(cursor: str | None) -> tuple[float, str] | None:
    if not cursor:
        return None
    try:
        score, member = cursor.split("|", 1)
        return float(score), member
    except ValueError:
        raise InvalidInput("invalid_input", [f"cursor {cursor!r} is malformed"]) from None


class _Source:
    """One partition index read lazily in descending (score, member) order."""

    __slots__ = ("key", "buf", "done", "batch", "after")

    def __init__(self, key: str, after: tuple[float, str] | None, batch: int) -> None:
        self.key = key
        self.buf: list[tuple[float, str]] = []
        self.done = False
        self.batch = batch
        self.after = after  # exclusive bound of the next fetch: the last buffered item or the cursor


def _fetch(backend: Backend, sources: Sequence[_Source]) -> None:
    """Append the next batch of each source to its buffer (one pipeline)."""
    pending = list(sources)
    while pending:
        pipe = backend.client.pipeline(transaction=False)
        for s in pending:
            hi = "+inf" if s.after is None else repr(s.after[0])
            pipe.zrevrangebyscore(s.key, hi, "-inf", start=0, num=s.batch, withscores=True)
        retry = []
        for s, raw in zip(pending, pipe.execute(), strict=True):
            items = [(float(sc), text(m)) for m, sc in raw]
            if s.after is not None:
                # The inclusive score bound returns already-consumed ties again; drop them.
                items = [it for it in items if _before(it, s.after)]
            s.done = len(raw) < s.batch
            if items:
                s.buf.extend(items)
                s.after = items[-1]
            elif not s.done:
                retry.append(s)  # a run of ties longer than the batch: read a bigger batch
            s.batch = min(s.batch * 2, 1024)
        pending = retry


def _before(a: tuple[float, str], b: tuple[float, str]) -> bool:
    """a comes after b in descending (score, member) order."""
    return a[0] < b[0] or (a[0] == b[0] and a[1] < b[1])


def merge_desc(backend: Backend, keys: Sequence[str], cursor: tuple[float, str] | None, want: int,
               accept: Callable[[list[str]], list[bool]], max_examined: int = 5000) -> tuple[list[str], int, bool]:
    """Members of `keys` in descending (score, member) order after `cursor`; `accept` filters batches.

    Returns (accepted members followed by the next cursor text or "", examined count, more).
    """
    first = max(2, -(-2 * want // max(1, len(keys))))
    sources = [_Source(k, cursor, first) for k in keys]
    _fetch(backend, sources)
    heap = [(-s.buf[0][0], _neg(s.buf[0][1]), i) for i, s in enumerate(sources) if s.buf]
    heapq.heapify(heap)
    out: list[str] = []
    last: tuple[float, str] | None = cursor
    examined = 0
    while heap and len(out) < want and examined < max_examined:
        batch: list[tuple[float, str]] = []
        while heap and len(batch) < want - len(out):
            _, _, i = heapq.heappop(heap)
            s = sources[i]
            batch.append(s.buf.pop(0))
            if not s.buf and not s.done:
                # Refill the drained source, and top up others that are nearly empty in the same trip.
                low = [x for x in sources if not x.done and len(x.buf) <= 1]
                was_empty = [x for x in low if not x.buf]
                _fetch(backend, low)
                for x in was_empty:
                    if x.buf:
                        j = sources.index(x)
                        heapq.heappush(heap, (-x.buf[0][0], _neg(x.buf[0][1]), j))
            elif s.buf:
                heapq.heappush(heap, (-s.buf[0][0], _neg(s.buf[0][1]), i))
        examined += len(batch)
        flags = accept([m for _, m in batch])
        for (sc, m), ok in zip(batch, flags, strict=True):
            last = (sc, m)
            if ok:
                out.append(m)
            if len(out) >= want:
                break
    more = (bool(heap) or any(not s.done for s in sources)) and last is not None
    cursor_out = f"{last[0]!r}|{last[1]}" if more and last is not None else ""
    return out + [cursor_out], examined, more


def _neg(m: str) -> str:
    # heapq is a min-heap; descending member order among equal scores needs an inverted key.
    return "".join(chr(0x10FFFF - ord(c)) for c in m)


def _unneg(m: str) -> str:
    return "".join(chr(0x10FFFF - ord(c)) for c in m)


def list_executions(backend: Backend, q: Query, lanes: Sequence[str]) -> ListPage:
    """Newest first across all partitions (by created time, or by index time when filtered by state)."""
    if not 1 <= q.limit <= 500:
        raise InvalidInput("invalid_input", ["limit must be within 1..500"])
    use_lanes = [q.lane] if q.lane else list(lanes)
    # Only partitions known to hold executions of these lanes (the registry ffcore keeps at create);
    # without one (data written by another client) fall back to every partition.
    by_lane = lane_partition_map(backend, use_lanes)
    if q.state:
        if q.state not in STATE_INDEXES:
            raise InvalidInput("invalid_input", [f"state {q.state!r} is not a public state"])
        keys = [PartitionKeys(n).lane(lane).index(sfx) for lane in use_lanes for n in by_lane[lane]
                for sfx in STATE_INDEXES[q.state]]
    else:
        keys = [PartitionKeys(n).created for n in sorted({n for parts in by_lane.values() for n in parts})]
    rows: dict[str, dict[str, str]] = {}
    tags: dict[str, dict[str, str]] = {}

    def accept(eids: list[str]) -> list[bool]:
        pipe = backend.client.pipeline(transaction=False)
        for e in eids:
            pipe.hmget(ExecKeys(e).core, ROW_FIELDS)
            if q.tag:
                pipe.hget(ExecKeys(e).tags, q.tag[0])
        raw = pipe.execute()
        step = 2 if q.tag else 1
        flags = []
        for i, e in enumerate(eids):
            row = dict(zip(ROW_FIELDS, map(text, raw[i * step]), strict=True))
            ok = bool(row["execution_id"])
            ok = ok and (q.lane is None or row["lane_id"] == q.lane)
            ok = ok and (q.state is None or row["public_state"] == q.state)
            ok = ok and (q.kind is None or row["execution_kind"] == q.kind)
            if q.tag:
                ok = ok and text(raw[i * step + 1]) == q.tag[1]
            if ok:
                rows[e] = row
            flags.append(ok)
        return flags

    found, examined, _more = merge_desc(backend, keys, parse_cursor(q.cursor), q.limit, accept)
    cursor = found.pop()
    return ListPage([rows[e] for e in found], cursor or None, examined, tags)


def lane_partition_map(backend: Backend, lanes: Sequence[str]) -> dict[str, list[int]]:
    every = list(range(backend.settings.partitions.flow))
    pipe = backend.client.pipeline(transaction=False)
    for lane in lanes:
        pipe.smembers(lane_partitions(lane))
    return {lane: sorted(int(text(x)) for x in raw) or every for lane, raw in zip(lanes, pipe.execute(), strict=True)}


def count_by_lane_state(backend: Backend, lanes: Sequence[str]) -> dict[str, dict[str, int]]:
    """{lane: {index suffix: count}} from ZCARDs over every partition (no iteration of members)."""
    from .keys import LANE_STATE_INDEXES

    by_lane = lane_partition_map(backend, lanes)
    pipe = backend.client.pipeline(transaction=False)
    order = [(lane, sfx, n) for lane in lanes for sfx in LANE_STATE_INDEXES for n in by_lane[lane]]
    for lane, sfx, n in order:
        pipe.zcard(PartitionKeys(n).lane(lane).index(sfx))
    out: dict[str, dict[str, int]] = {lane: dict.fromkeys(LANE_STATE_INDEXES, 0) for lane in lanes}
    for (lane, sfx, _), count in zip(order, pipe.execute() if order else [], strict=True):
        out[lane][sfx] += int(count)
    return out


def total_created(backend: Backend) -> int:
    pipe = backend.client.pipeline(transaction=False)
    for n in range(backend.settings.partitions.flow):
        pipe.zcard(PartitionKeys(n).created)
    return int(sum(pipe.execute()))
