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


Item = tuple[float, str, int]  # (score, member, index of the source key)
Accept = Callable[[list[Item]], list[bool]]


class _Source:
    """One index ZSET read lazily, in batches, in the merge direction."""

    __slots__ = ("key", "buf", "done", "batch", "after")

    def __init__(self, key: str, after: tuple[float, str] | None, batch: int) -> None:
        self.key = key
        self.buf: list[tuple[float, str]] = []
        self.done = False
        self.batch = batch
        self.after = after  # exclusive bound of the next fetch: the last buffered item or the cursor


def _fetch(backend: Backend, sources: Sequence[_Source], descending: bool) -> None:
    """Append the next batch of each source to its buffer (one pipeline per round)."""
    pending = list(sources)
    while pending:
        pipe = backend.client.pipeline(transaction=False)
        for s in pending:
            bound = repr(s.after[0]) if s.after is not None else ("+inf" if descending else "-inf")
            if descending:
                pipe.zrevrangebyscore(s.key, bound, "-inf", start=0, num=s.batch, withscores=True)
            else:
                pipe.zrangebyscore(s.key, bound, "+inf", start=0, num=s.batch, withscores=True)
        retry = []
        for s, raw in zip(pending, pipe.execute(), strict=True):
            items = [(float(sc), text(m)) for m, sc in raw]
            if s.after is not None:
                # The inclusive score bound returns already-consumed ties again; drop them.
                after = s.after
                items = [it for it in items if (it < after if descending else it > after)]
            s.done = len(raw) < s.batch
            if items:
                s.buf.extend(items)
                s.after = items[-1]
            elif not s.done:
                retry.append(s)  # a run of ties longer than the batch: read a bigger batch
            s.batch = min(s.batch * 2, 1024)
        pending = retry


def _neg(m: str) -> str:
    # heapq is a min-heap; descending member order among equal scores needs an inverted key.
    return "".join(chr(0x10FFFF - ord(c)) for c in m)


def merge(backend: Backend, keys: Sequence[str], cursor: tuple[float, str] | None, want: int, accept: Accept, *,
          descending: bool = True, max_examined: int = 5000) -> tuple[list[Item], str | None, int]:
    """Members of `keys` in (score, member) order after `cursor`, filtered by `accept` in batches.

    Returns (accepted items, next cursor `<score>|<member>` or None, examined count).
    """

    def heap_key(item: tuple[float, str], i: int) -> tuple[float, str, int]:
        return (-item[0], _neg(item[1]), i) if descending else (item[0], item[1], i)

    sources = [_Source(k, cursor, max(2, -(-2 * want // max(1, len(keys))))) for k in keys]
    _fetch(backend, sources, descending)
    heap = [heap_key(s.buf[0], i) for i, s in enumerate(sources) if s.buf]
    heapq.heapify(heap)
    out: list[Item] = []
    last = cursor
    examined = 0
    leftover = False
    while heap and len(out) < want and examined < max_examined:
        batch: list[Item] = []
        while heap and len(batch) < want - len(out):
            i = heapq.heappop(heap)[2]
            s = sources[i]
            sc, m = s.buf.pop(0)
            batch.append((sc, m, i))
            if not s.buf and not s.done:
                # Refill the drained source, and top up others that are nearly empty in the same trip.
                low = [x for x in sources if not x.done and len(x.buf) <= 1]
                was_empty = [x for x in low if not x.buf]
                _fetch(backend, low, descending)
                for x in was_empty:
                    if x.buf:
                        heapq.heappush(heap, heap_key(x.buf[0], sources.index(x)))
            elif s.buf:
                heapq.heappush(heap, heap_key(s.buf[0], i))
        examined += len(batch)
        for j, ((sc, m, i), ok) in enumerate(zip(batch, accept(batch), strict=True)):
            last = (sc, m)
            if ok:
                out.append((sc, m, i))
            if len(out) >= want:
                leftover = j < len(batch) - 1
                break
    more = (leftover or bool(heap) or any(not s.done for s in sources)) and last is not None
    return out, (f"{last[0]!r}|{last[1]}" if more and last is not None else None), examined


def merge_desc(backend: Backend, keys: Sequence[str], cursor: tuple[float, str] | None, want: int,
               accept: Callable[[list[str]], list[bool]], max_examined: int = 5000) -> tuple[list[str], int, bool]:
    """Newest-first members (no source indexes): (accepted members followed by the cursor or "", examined, more)."""
    found, nxt, examined = merge(backend, keys, cursor, want, lambda batch: accept([m for _, m, _ in batch]),
                                 max_examined=max_examined)
    return [m for _, m, _ in found] + [nxt or ""], examined, nxt is not None


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
