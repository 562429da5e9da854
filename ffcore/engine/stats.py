"""Per-minute statistics for the overview charts (issue #25, item 4), kept by a sampler in ffscanners.

Why a sampler and not counters in the commit path: the 47 contract functions must write exactly what
they write, so a counter would have to live in our Python around them — but executions also end where
no ffcore commit runs (cancels, timeouts and deadlines in the scanners, a Rust v0.2.0 worker on the same
Valkey, the library's own fast paths). Every one of those lands in a lane's terminal index (score = the
server time it ended), so the sampler reads what the indexes already say and counts every ending once,
whoever caused it; and the backlog over time can only come from sampling anyway.

Each tick (one sampler at a time across processes, `STATS_LOCK`):
- the terminal index entries of every lane and partition scored in (cursor, now - SETTLE_MS] are read
  (at most MAX_PER_TICK; the cursor stops where it stopped reading), their outcome and last attempt's
  start/end, and counted into `stats_minute(m)`: `done:<lane>` (success), `failed:<lane>` (failed or
  expired), and the attempt's claim-to-complete time into a log-scale histogram `lat:<lane>:<bucket>`
  (buckets LATENCY_RATIO apart, so a percentile read back is within that ratio; an hour of any
  throughput is 60 small hashes, not a list of every time);
- the lane's backlog now (eligible + admission-blocked indexes) is written as `backlog:<lane>` of the
  current minute.
Keys expire after `KEEP_S`. A replayed execution that ends again is counted again (it ended again).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from ffcore import events, keys
from ffcore.backend import Backend
from ffcore.execution.listing import count_by_lane_state, lane_partition_map
from ffcore.keys import ExecKeys, PartitionKeys
from ffcore.reads import text

from .base import Scanner

log = logging.getLogger("ffcore.stats")

MINUTE_MS = 60_000
#: How long statistics are kept (the charts show the last hour).
KEEP_S = 2 * 3600
#: Entries younger than this are left for the next tick (an index write of the same millisecond may still come).
SETTLE_MS = 1000
#: Terminal entries counted per tick at most (the rest next tick: the cursor stops where reading stopped).
MAX_PER_TICK = 20_000
#: Width of a latency histogram bucket: each bucket's upper bound is this many times the previous one's.
LATENCY_RATIO = 1.1
#: Index suffixes counted as backlog: ready to run or held only by admission.
BACKLOG_INDEXES = ("eligible", "blocked:budget", "blocked:quota", "blocked:route", "blocked:operator")
#: Outcomes counted as failures.
FAILED_OUTCOMES = frozenset({"failed", "expired"})
#: A sampler's hold on the lock (longer than any tick).
LOCK_MS = 30_000
#: When a first tick starts (no cursor yet), how far back it counts.
FIRST_LOOKBACK_MS = 3600_000


def minute_of(ms: int) -> int:
    return ms // MINUTE_MS


def latency_bucket(ms: int) -> int:
    """The histogram bucket of a duration: 0 for <= 1 ms, then one per LATENCY_RATIO step."""
    return 0 if ms <= 1 else math.ceil(math.log(ms) / math.log(LATENCY_RATIO))


def bucket_value(b: int) -> int:
    """A bucket's representative duration (its upper bound, ms)."""
    return 1 if b <= 0 else round(LATENCY_RATIO ** b)


@dataclass
class StatsSampler(Scanner):
    """Counts endings and samples backlog per minute (see the module docstring)."""

    interval_ms: int = 5000
    name: str = "stats_sampler"
    settle_ms: int = SETTLE_MS

    def tick(self) -> int:
        b = self.backend
        token = f"{id(self)}:{b.now_ms()}"
        self.stats.ticks += 1
        if not b.client.set(keys.STATS_LOCK, token, nx=True, px=LOCK_MS):
            return 0  # another process is counting
        try:
            n = sample(b, settle_ms=self.settle_ms)
        finally:
            if text(b.client.get(keys.STATS_LOCK) or b"") == token:
                b.client.delete(keys.STATS_LOCK)
        self.stats.acted += n
        return n


def _lanes(backend: Backend) -> list[str]:
    return sorted(text(x) for x in backend.client.smembers(keys.LANES_INDEX))


def sample(backend: Backend, now_ms: int | None = None, settle_ms: int = SETTLE_MS) -> int:
    """One sampling pass (the caller holds the lock); returns how many endings were counted."""
    now = backend.now_ms() if now_ms is None else now_ms
    until = now - settle_ms
    raw_cursor = backend.client.get(keys.STATS_CURSOR)
    since = int(text(raw_cursor)) if raw_cursor else until - FIRST_LOOKBACK_MS
    lanes = _lanes(backend)
    by_lane = lane_partition_map(backend, lanes)
    sources = [(lane, n) for lane in lanes for n in by_lane[lane]]
    ended: list[tuple[str, str, int]] = []  # (lane, eid, ended at)
    cursor = until
    if sources and until > since:
        replies = backend.read_many([("ZRANGEBYSCORE", PartitionKeys(n).lane(lane).index("terminal"), f"({since}",
                                      until, "WITHSCORES", "LIMIT", 0, MAX_PER_TICK) for lane, n in sources])
        for (lane, _), reply in zip(sources, replies, strict=True):
            ended += [(lane, m, int(sc)) for sc, m in _scored(reply)]
        if len(ended) > MAX_PER_TICK:  # count the oldest; the rest (after the cursor) next tick
            ended.sort(key=lambda x: x[2])
            cursor = ended[MAX_PER_TICK][2] - 1
            ended = [e for e in ended if e[2] <= cursor]
    counts: dict[int, dict[str, int]] = {}
    if ended:
        cores = backend.read_many([("HMGET", ExecKeys(e).core, "terminal_outcome", "current_attempt_index")
                                   for _, e, _ in ended])
        attempts = backend.read_many([("HMGET", ExecKeys(e).attempt(text(c[1]) or "0"), "started_at", "ended_at")
                                      for (_, e, _), c in zip(ended, cores, strict=True)])
        for (lane, _, at), core, att in zip(ended, cores, attempts, strict=True):
            outcome = text(core[0]) if core[0] else ""
            m = minute_of(at)
            bucket = counts.setdefault(m, {})
            if outcome == "success":
                bucket[f"done:{lane}"] = bucket.get(f"done:{lane}", 0) + 1
            elif outcome in FAILED_OUTCOMES:
                bucket[f"failed:{lane}"] = bucket.get(f"failed:{lane}", 0) + 1
            start, end = (int(text(v)) if v and text(v).isdigit() else 0 for v in att)
            if outcome == "success" and start and end >= start:
                f = f"lat:{lane}:{latency_bucket(end - start)}"
                bucket[f] = bucket.get(f, 0) + 1
    backlog = count_by_lane_state(backend, lanes) if lanes else {}
    this_minute = minute_of(now)
    # Not a transaction: on a cluster these keys live on several nodes. A tick that dies half-way leaves the
    # cursor behind, and the next one counts those endings again (rare; the charts are a picture, not a ledger).
    pipe = backend.client.pipeline(transaction=False)
    for m, fields in counts.items():
        for f, n in fields.items():
            pipe.hincrby(keys.stats_minute(m), f, n)
        pipe.expire(keys.stats_minute(m), KEEP_S)
    if backlog:
        pipe.hset(keys.stats_minute(this_minute),
                  mapping={f"backlog:{lane}": sum(c.get(s, 0) for s in BACKLOG_INDEXES) for lane, c in backlog.items()})
        pipe.expire(keys.stats_minute(this_minute), KEEP_S)
    pipe.set(keys.STATS_CURSOR, max(cursor, since))
    pipe.execute()
    if ended or backlog:
        events.publish(backend, topics=["overview"])  # the overview's charts move on
    return len(ended)


def _scored(reply: object) -> list[tuple[float, str]]:
    """A WITHSCORES reply (RESP2 flat or RESP3 pairs) as (score, member) items."""
    if not isinstance(reply, list | tuple) or not reply:
        return []
    if isinstance(reply[0], list | tuple):
        return [(float(sc), text(m)) for m, sc in reply]
    return [(float(reply[i + 1]), text(reply[i])) for i in range(0, len(reply), 2)]


# ------------------------------------------------------------------ reading
@dataclass
class Series:
    """The last `minutes` minutes, oldest first (index i is minute `first + i`)."""

    first: int
    minutes: int
    done: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    #: lane -> backlog per minute (None where no sample was taken).
    backlog: dict[str, list[int | None]] = field(default_factory=dict)
    #: lane -> (p50, p95, samples) of claim-to-complete over the window, ms.
    latency: dict[str, tuple[int, int, int]] = field(default_factory=dict)


def read_series(backend: Backend, lanes: Sequence[str], now_ms: int | None = None, minutes: int = 60) -> Series:
    """Throughput, backlog and latency of the last `minutes` minutes (one pipeline of `minutes` HGETALLs)."""
    now = backend.now_ms() if now_ms is None else now_ms
    last = minute_of(now)
    first = last - minutes + 1
    hashes = backend.read_many([("HGETALL", keys.stats_minute(m)) for m in range(first, last + 1)])
    s = Series(first, minutes, backlog={lane: [None] * minutes for lane in lanes})
    hist: dict[str, dict[int, int]] = {}
    for i, raw in enumerate(hashes):
        h = _as_map(raw)
        s.done.append(sum(int(v) for f, v in h.items() if f.startswith("done:")))
        s.failed.append(sum(int(v) for f, v in h.items() if f.startswith("failed:")))
        for f, v in h.items():
            if f.startswith("lat:"):
                lane, _, b = f[4:].rpartition(":")
                per = hist.setdefault(lane, {})
                per[int(b)] = per.get(int(b), 0) + int(v)
        for lane in lanes:
            sampled = h.get(f"backlog:{lane}")
            if sampled is not None:
                s.backlog[lane][i] = int(sampled)
    for lane, per in hist.items():
        n = sum(per.values())
        s.latency[lane] = (hist_percentile(per, 0.5), hist_percentile(per, 0.95), n)
    return s


def hist_percentile(per_bucket: dict[int, int], q: float) -> int:
    """Nearest-rank percentile of a latency histogram, as its bucket's representative duration."""
    n = sum(per_bucket.values())
    rank = max(1, math.ceil(q * n))
    seen = 0
    for b in sorted(per_bucket):
        seen += per_bucket[b]
        if seen >= rank:
            return bucket_value(b)
    return 0


def _as_map(raw: object) -> dict[str, str]:
    if isinstance(raw, dict):
        return {text(k): text(v) for k, v in raw.items()}
    if isinstance(raw, list | tuple):
        return {text(raw[i]): text(raw[i + 1]) for i in range(0, len(raw), 2)}
    return {}
