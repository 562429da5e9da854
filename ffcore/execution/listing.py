"""Cross-partition listing: a k-way merge over per-partition index ZSETs with cursor pagination.

Each page reads a few heads from every partition's index in one pipeline, merges them in score
order, refills only partitions whose buffered heads ran out, and reads the row fields of the page in
one more pipeline. Work per page is bounded (partitions x small batch), independent of how many
executions are stored. Cursors are `<score>|<eid>` and exclusive.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ffcore.backend import Backend
from ffcore.errors import InvalidInput
from ffcore.keys import ExecKeys, PartitionKeys
from ffcore.reads import text
from ffcore.upstream.reads import indexes

ROW_FIELDS = ("execution_id", "namespace", "lane_id", "execution_kind", "public_state", "priority", "created_at",
              "total_attempt_count", "current_worker_id", "current_worker_instance_id", "lease_expires_at",
              "flow_id", "completed_at", "blocking_reason", "started_at")
#: Sort orders of the list: by created time (by index time under a state filter, where the index is the source).
ORDERS = ("newest", "oldest")

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
    #: "newest" or "oldest" first.
    order: str = "newest"
    #: Created between these (ms, inclusive; None = open).
    created_from: int | None = None
    created_to: int | None = None
    #: "prev": the page before `cursor` (the first row's cursor of the page shown), in the same order.
    direction: str = "next"
    #: Only this partition (the REST API's `partition`); None = every partition of the lanes.
    partition: int | None = None


@dataclass
class ListPage:
    rows: list[dict[str, str]]
    next_cursor: str | None
    #: Index entries examined for this page (bounded; shows the cost of post-filters).
    examined: int = 0
    tags: dict[str, dict[str, str]] = field(default_factory=dict)
    #: Partitions whose indexes the page was merged from (what a matching total counts over).
    partitions: list[int] = field(default_factory=list)
    #: Cursor of the page before this one (its first row), or None on the first page.
    prev_cursor: str | None = None


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

    __slots__ = ("key", "buf", "done", "batch", "after", "ties", "at_cursor")

    def __init__(self, key: str, after: tuple[float, str] | None, batch: int) -> None:
        self.key = key
        self.buf: list[tuple[float, str]] = []
        self.done = False
        self.batch = batch
        self.after = after  # exclusive bound of the next fetch: the last buffered item or the cursor
        #: Entries already read at the score of `after`: the next read skips them (LIMIT offset), so a long
        #: run of equal scores (a batch created in one millisecond) is not read again from its start.
        self.ties = 0
        #: Starting from a cursor, how many entries share its score is unknown: the first read takes that
        #: whole run of equal scores (and a batch after it) instead of feeling its way through it.
        self.at_cursor = after is not None


def _fetch(backend: Backend, sources: Sequence[_Source], descending: bool) -> None:
    """Append the next batch of each source to its buffer (one pipeline per round)."""
    pending = list(sources)
    rng = "ZREVRANGEBYSCORE" if descending else "ZRANGEBYSCORE"
    end = "-inf" if descending else "+inf"
    while pending:
        commands: list[tuple[Any, ...]] = []
        for s in pending:
            bound = repr(s.after[0]) if s.after is not None else ("+inf" if descending else "-inf")
            if s.at_cursor:
                commands.append((rng, s.key, bound, bound, "WITHSCORES"))  # the cursor's run of equal scores
                commands.append((rng, s.key, "(" + bound, end, "WITHSCORES", "LIMIT", 0, s.batch))
            else:
                commands.append((rng, s.key, bound, end, "WITHSCORES", "LIMIT", s.ties, s.batch))
        replies = iter(backend.read_many(commands))
        retry = []
        for s in pending:
            run_at_cursor = _scored(next(replies)) if s.at_cursor else []
            raw = _scored(next(replies))
            items = run_at_cursor + raw
            if s.at_cursor:
                s.at_cursor = False
                s.ties = len(run_at_cursor) if not raw else _trailing_run(items)
            elif raw:
                # Entries read at the last score: from that score's first one, or on from the offset when
                # the whole batch is still at the bound's score.
                same = s.after is not None and items[-1][0] == s.after[0]
                s.ties = s.ties + len(raw) if same else _trailing_run(items)
            if s.after is not None:
                # The cursor (or a write since the last read) can still return consumed entries: drop them.
                after = s.after
                items = [it for it in items if (it < after if descending else it > after)]
            s.done = len(raw) < s.batch
            if items:
                s.buf.extend(items)
                s.after = items[-1]
            elif not s.done:
                retry.append(s)  # every entry read was consumed already: read on past them
            s.batch = min(s.batch * 2, 1024)
        pending = retry


def _scored(reply: Any) -> list[tuple[float, str]]:
    """A WITHSCORES range reply (RESP2: member, score, ...; RESP3: pairs) as (score, member) items."""
    if reply and isinstance(reply[0], list | tuple):
        return [(float(sc), text(m)) for m, sc in reply]
    return [(float(reply[i + 1]), text(reply[i])) for i in range(0, len(reply), 2)]


def _trailing_run(items: list[tuple[float, str]]) -> int:
    """How many items at the end share the last item's score."""
    last, n = items[-1][0], 0
    for sc, _ in reversed(items):
        if sc != last:
            break
        n += 1
    return n


def _take_safe(sources: Sequence[_Source], descending: bool) -> list[Item]:
    """Pop every buffered item that no unread index entry can precede, in merge order.

    A source that is not done holds unread entries only beyond its `after` bound, so an item is safe
    once it is at or before the least advanced such bound.
    """
    open_bounds = [s.after for s in sources if not s.done and s.after is not None]
    bound = (max(open_bounds) if descending else min(open_bounds)) if open_bounds else None
    out: list[Item] = []
    for i, s in enumerate(sources):
        if not s.buf:
            continue
        if bound is None:
            n = len(s.buf)
        else:
            n = 0
            for it in s.buf:  # buffers are in merge order: stop at the first unsafe item
                if (it < bound) if descending else (it > bound):
                    break
                n += 1
        out += [(sc, m, i) for sc, m in s.buf[:n]]
        del s.buf[:n]
    out.sort(key=lambda it: (it[0], it[1]), reverse=descending)
    return out


#: Most index entries handed to `accept` at once (a post-filter with few matches reads in big batches).
MAX_ACCEPT_BATCH = 1000


def merge(backend: Backend, keys: Sequence[str], cursor: tuple[float, str] | None, want: int, accept: Accept, *,
          descending: bool = True, max_examined: int = 5000,
          stop: float | None = None) -> tuple[list[Item], str | None, int]:
    """Members of `keys` in (score, member) order after `cursor`, filtered by `accept` in batches; the walk
    ends at the first score past `stop` (a time range's far end on a created-scored index).

    Each `accept` batch is sized from the acceptance rate seen so far, so a selective post-filter
    needs a few round trips rather than one per handful of matches. Returns (accepted items, next
    cursor `<score>|<member>` or None, examined count).
    """
    sources = [_Source(k, cursor, max(2, -(-2 * want // max(1, len(keys))))) for k in keys]
    _fetch(backend, sources, descending)
    pending: list[Item] = []  # safe items in merge order, not yet examined
    out: list[Item] = []
    last = cursor
    examined = 0
    leftover = stopped = False
    while len(out) < want and examined < max_examined:
        missing = want - len(out)
        need = missing
        if examined:
            # Size the batch from the acceptance rate so far, with a margin of about two standard deviations
            # (matches arrive roughly like a Poisson count) so the last few rows rarely need one more trip;
            # grow at most threefold per trip, since a small first sample can make a common match look rare.
            rate = (len(out) + 1) / (examined + 1)
            need = min(int((missing + 2 * math.sqrt(missing) + 2) / rate), 3 * examined + missing)
        need = min(need, MAX_ACCEPT_BATCH, max_examined - examined)
        while True:
            pending += _take_safe(sources, descending)
            low = [s for s in sources if not s.done and len(s.buf) <= (need - len(pending)) // len(sources)]
            if len(pending) >= need or not low:
                break
            share = -(-(need - len(pending)) * 3 // (2 * len(low)))  # what each still has to give, and half again
            for s in low:
                s.batch = min(max(s.batch, share), 1024)
            _fetch(backend, low, descending)
        if not pending:
            break
        batch, pending = pending[:need], pending[need:]
        if stop is not None:
            cut = next((j for j, it in enumerate(batch) if (it[0] < stop if descending else it[0] > stop)), None)
            if cut is not None:
                batch, pending, stopped = batch[:cut], [], True
                if not batch:
                    break
        examined += len(batch)
        for j, (item, ok) in enumerate(zip(batch, accept(batch), strict=True)):
            last = (item[0], item[1])
            if ok:
                out.append(item)
            if len(out) >= want:
                leftover = j < len(batch) - 1
                break
    more = leftover or (not stopped and (bool(pending) or any(s.buf or not s.done for s in sources)))
    return out, (f"{last[0]!r}|{last[1]}" if more and last is not None else None), examined


def merge_desc(backend: Backend, keys: Sequence[str], cursor: tuple[float, str] | None, want: int,
               accept: Callable[[list[str]], list[bool]], max_examined: int = 5000) -> tuple[list[str], int, bool]:
    """Newest-first members (no source indexes): (accepted members followed by the cursor or "", examined, more)."""
    found, nxt, examined = merge(backend, keys, cursor, want, lambda batch: accept([m for _, m, _ in batch]),
                                 max_examined=max_examined)
    return [m for _, m, _ in found] + [nxt or ""], examined, nxt is not None


def list_executions(backend: Backend, q: Query, lanes: Sequence[str]) -> ListPage:
    """One page across partitions, newest or oldest first (by created time, or by index time when filtered by
    state), forward or back from a cursor.

    Source indexes: a state filter reads the lane state indexes; otherwise a tag filter reads our per-tag index,
    a kind filter our per-kind index (ffcore.execution.filter_index), and no filter the created index — all
    scored by created time, so a created-between range bounds the walk at both ends. Every filter is still
    checked on the rows read."""
    if not 1 <= q.limit <= 500:
        raise InvalidInput("invalid_input", ["limit must be within 1..500"])
    if q.order not in ORDERS:
        raise InvalidInput("invalid_input", [f"order must be one of {', '.join(ORDERS)}"])
    if q.direction not in ("next", "prev"):
        raise InvalidInput("invalid_input", ["direction must be next or prev"])
    if q.direction == "prev" and not q.cursor:
        raise InvalidInput("invalid_input", ["cursor: a previous page needs the cursor of the page after it"])
    use_lanes = [q.lane] if q.lane else list(lanes)
    if q.state and q.state not in STATE_INDEXES:
        raise InvalidInput("invalid_input", [f"state {q.state!r} is not a public state"])
    # Only partitions known to hold executions of these lanes (the registry ffcore keeps at create);
    # without one (data written by another client) fall back to every partition.
    by_lane = lane_partition_map(backend, use_lanes)
    if q.partition is not None:
        by_lane = {lane: [n for n in parts if n == q.partition] for lane, parts in by_lane.items()}
    partitions = sorted({n for parts in by_lane.values() for n in parts})
    ix = indexes(backend)
    if q.state:
        keys = [PartitionKeys(n).lane(lane).index(sfx) for lane in use_lanes for n in by_lane[lane]
                for sfx in STATE_INDEXES[q.state]]
    elif q.tag and ix.filter_indexes:
        keys = [PartitionKeys(n).tag_created(*q.tag) for n in partitions]
    elif q.kind and ix.filter_indexes:
        keys = [PartitionKeys(n).kind_created(q.kind) for n in partitions]
    else:  # upstream: a kind or tag filter post-filters the reconciled created index
        keys = [ix.created(n) for n in partitions]
    rows: dict[str, dict[str, str]] = {}
    tags: dict[str, dict[str, str]] = {}

    # Post-filters compare the raw field bytes; only rows that pass are decoded.
    filters = [(f, v.encode("utf-8", "surrogateescape")) for f, v in
               (("lane_id", q.lane), ("public_state", q.state), ("execution_kind", q.kind)) if v is not None]
    wanted = [(ROW_FIELDS.index(f), v) for f, v in filters]
    tag_value = q.tag[1].encode("utf-8", "surrogateescape") if q.tag else None
    ranged = q.created_from is not None or q.created_to is not None
    lo = q.created_from if q.created_from is not None else -math.inf
    hi = q.created_to if q.created_to is not None else math.inf
    # A selective filter (a lane across the created indexes, a range over a state index) examines many entries
    # per row shown: those are read by their filter fields only, and the rows shown in one batch at the end. A
    # state index mostly holds its state, and a kind or tag index only its kind or tag: rows are read while
    # examining.
    narrow = bool((q.lane and not q.state and not (ix.filter_indexes and (q.kind or q.tag))) or (ranged and q.state)
                  or (not ix.filter_indexes and not q.state and (q.kind or q.tag)))
    probe = ["execution_id", *(f for f, _ in filters), "created_at"]
    at_created = len(probe) - 1 if narrow else ROW_FIELDS.index("created_at")

    def matches(vals: Sequence[Any], checks: Sequence[tuple[int, bytes]], created: int) -> bool:
        if not vals[0] or not all(_raw(vals[j]) == v for j, v in checks):
            return False
        return not ranged or lo <= int(_raw(vals[created]) or 0) <= hi

    def accept(eids: list[str]) -> list[bool]:
        commands: list[tuple[str, ...]] = []
        for e in eids:
            k = ExecKeys(e)
            commands.append(("HMGET", k.core, *(probe if narrow else ROW_FIELDS)))
            # Examined is about shown here (not narrow): the row's tags ride along instead of one more trip.
            commands.append(("HGET", k.tags, q.tag[0] if q.tag else "") if narrow else ("HGETALL", k.tags))
        raw = backend.read_many(commands)
        checks = [(j, v) for j, (_, v) in enumerate(filters, start=1)] if narrow else wanted
        flags = []
        for i, e in enumerate(eids):
            vals = raw[i * 2]
            ok = matches(vals, checks, at_created)
            if ok and tag_value is not None:
                got = raw[i * 2 + 1] if narrow else _pairs(raw[i * 2 + 1]).get(q.tag[0] if q.tag else "")
                ok = _raw(got) == tag_value
            if ok and not narrow:
                rows[e] = dict(zip(ROW_FIELDS, map(text, vals), strict=True))
                tags[e] = _pairs(raw[i * 2 + 1])
            flags.append(ok)
        return flags

    newest = q.order == "newest"
    back = q.direction == "prev"
    descending = newest != back  # a previous page walks the other way from its cursor
    start = parse_cursor(q.cursor)
    stop: float | None = None
    if not q.state:  # created-scored sources: the range bounds the walk
        near, far = (hi, lo) if descending else (lo, hi)
        if start is None and not math.isinf(near):
            start = (near, "\U0010ffff") if descending else (near, "")  # every entry at `near` included
        stop = None if math.isinf(far) else far
    found, nxt, examined = merge(backend, keys, start, q.limit, lambda b: accept([m for _, m, _ in b]),
                                 descending=descending, stop=stop)
    if back:
        found.reverse()
    eids = [m for _, m, _ in found]
    if narrow and eids:
        full = backend.read_many([c for e in eids for c in (("HMGET", ExecKeys(e).core, *ROW_FIELDS),
                                                             ("HGETALL", ExecKeys(e).tags))])
        created_at = ROW_FIELDS.index("created_at")
        for i, e in enumerate(eids):
            vals = full[2 * i]
            if matches(vals, wanted, created_at):  # changed since it was examined: not shown
                rows[e] = dict(zip(ROW_FIELDS, map(text, vals), strict=True))
                tags[e] = _pairs(full[2 * i + 1])
    shown = [e for e in eids if e in rows]

    def cur(item: Item) -> str:
        return f"{item[0]!r}|{item[1]}"

    if back:  # came from the page after: there is one; one before if the backward walk had more
        next_cursor = cur(found[-1]) if found else q.cursor
        prev_cursor = cur(found[0]) if found and nxt else None
    else:
        next_cursor = nxt
        prev_cursor = cur(found[0]) if found and q.cursor else None
    return ListPage([rows[e] for e in shown], next_cursor, examined, tags, partitions, prev_cursor)


def _pairs(reply: Any) -> dict[str, str]:
    """An HGETALL reply (a dict, or a flat list under some clients) as text pairs."""
    if isinstance(reply, dict):
        return {text(k): text(v) for k, v in reply.items()}
    return {text(reply[i]): text(reply[i + 1]) for i in range(0, len(reply or []), 2)}


def _raw(v: object) -> bytes:
    if v is None:
        return b""
    return v if isinstance(v, bytes) else str(v).encode("utf-8", "surrogateescape")


def lane_partition_map(backend: Backend, lanes: Sequence[str]) -> dict[str, list[int]]:
    every = list(range(backend.settings.partitions.flow))
    registry = indexes(backend).lane_partitions
    pipe = backend.client.pipeline(transaction=False)
    for lane in lanes:
        pipe.smembers(registry(lane))
    return {lane: sorted(int(text(x)) for x in raw) or every for lane, raw in zip(lanes, pipe.execute(), strict=True)}


def count_by_lane_state(backend: Backend, lanes: Sequence[str]) -> dict[str, dict[str, int]]:
    """{lane: {index suffix: count}} from ZCARDs over every partition (no iteration of members)."""
    from ffcore.keys import LANE_STATE_INDEXES

    by_lane = lane_partition_map(backend, lanes)
    pipe = backend.client.pipeline(transaction=False)
    order = [(lane, sfx, n) for lane in lanes for sfx in LANE_STATE_INDEXES for n in by_lane[lane]]
    for lane, sfx, n in order:
        pipe.zcard(PartitionKeys(n).lane(lane).index(sfx))
    out: dict[str, dict[str, int]] = {lane: dict.fromkeys(LANE_STATE_INDEXES, 0) for lane in lanes}
    for (lane, sfx, _), count in zip(order, pipe.execute() if order else [], strict=True):
        out[lane][sfx] += int(count)
    return out


def total_created(backend: Backend, partitions: Sequence[int] | None = None) -> int:
    """Executions in the created indexes of `partitions` (default: every partition), from ZCARDs."""
    parts = range(backend.settings.partitions.flow) if partitions is None else partitions
    created = indexes(backend).created
    pipe = backend.client.pipeline(transaction=False)
    for n in parts:
        pipe.zcard(created(n))
    return int(sum(pipe.execute())) if parts else 0


def read_rows(backend: Backend, eids: Sequence[str]) -> dict[str, dict[str, str]]:
    """The list row fields of these executions, one pipeline (executions that no longer exist are left out)."""
    if not eids:
        return {}
    raw = backend.read_many([("HMGET", ExecKeys(e).core, *ROW_FIELDS) for e in eids])
    return {e: dict(zip(ROW_FIELDS, map(text, vals), strict=True)) for e, vals in zip(eids, raw, strict=True)
            if vals and vals[0]}


def read_tags(backend: Backend, eids: Sequence[str]) -> dict[str, dict[str, str]]:
    """Every tag of each execution, one pipeline."""
    raw = backend.read_many([("HGETALL", ExecKeys(e).tags) for e in eids]) if eids else []
    return {e: _pairs(r) for e, r in zip(eids, raw, strict=True)}


def read_tag_values(backend: Backend, eids: Sequence[str], key: str) -> dict[str, str]:
    """The value of tag `key` of each execution ("" when unset), one pipeline."""
    raw = backend.read_many([("HGET", ExecKeys(e).tags, key) for e in eids])
    return {e: text(v) if v else "" for e, v in zip(eids, raw, strict=True)}


def row_matches(row: dict[str, str], q: Query, tags: dict[str, str] | None = None) -> bool:
    """Whether a row (ROW_FIELDS) passes the list filters of `q` (`tags`: the execution's tags, for a tag filter)."""
    if q.lane and row.get("lane_id") != q.lane:
        return False
    if q.state and row.get("public_state") != q.state:
        return False
    if q.kind and row.get("execution_kind") != q.kind:
        return False
    return not q.tag or (tags or {}).get(q.tag[0]) == q.tag[1]
