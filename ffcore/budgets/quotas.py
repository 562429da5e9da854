"""Quota policies: create, and the status read (window usage vs rate limit, concurrency vs cap).

A policy admits at most `max_requests_per_window` executions per sliding window of `window_seconds`
and holds at most `active_concurrency_cap` admitted executions in flight (0 = no limit). Admission
and release happen in `ffcore.budgets.admission`; this module only creates and reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ffcore import functions as F
from ffcore import keys
from ffcore.backend import Backend
from ffcore.budgets.budgets import wall_ms
from ffcore.errors import InvalidInput
from ffcore.ids import new_uuid, parse_quota_id
from ffcore.keys import QuotaKeys
from ffcore.partition import quota_partition
from ffcore.reads import text

#: Definition fields the scheduler reads (`jitter_ms` is optional and never written by the library).
DEF_FIELDS = ("requests_per_window_seconds", "max_requests_per_window", "active_concurrency_cap", "jitter_ms")


def quota_keys(backend: Backend, quota_id: str) -> QuotaKeys:
    qid = parse_quota_id(quota_id)
    return QuotaKeys(quota_partition(qid, backend.settings.partitions.quota), qid)


def _int(v: str | None) -> int:
    try:
        return int(float(v or 0))
    except ValueError:
        return 0


@dataclass(frozen=True)
class QuotaDef:
    quota_id: str
    window_seconds: int
    max_requests: int
    cap: int
    jitter_ms: int = 0

    @classmethod
    def from_fields(cls, quota_id: str, vals: Sequence[str]) -> QuotaDef:
        w, r, c, j = (_int(v) for v in vals)
        return cls(quota_id, w, r, c, j)

    @property
    def window_ms(self) -> int:
        return self.window_seconds * 1000


def create_quota_policy(backend: Backend, *, window_seconds: int, max_requests_per_window: int = 0,
                        max_concurrent: int = 0, quota_id: str | None = None,
                        now_ms: int | None = None) -> tuple[str, bool]:
    """Create a policy (0 = no limit); returns (quota_policy_id, created). An existing id is unchanged."""
    for name, v in (("window_seconds", window_seconds), ("max_requests_per_window", max_requests_per_window),
                    ("max_concurrent", max_concurrent)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise InvalidInput("invalid_input", [f"{name} must be a non-negative integer"])
    if max_requests_per_window and not window_seconds:
        raise InvalidInput("invalid_input", ["a rate limit needs a window of at least one second"])
    q = quota_keys(backend, quota_id or new_uuid())
    reply = backend.call(F.create_quota_policy(q, window_seconds=window_seconds,
                                               max_requests_per_window=max_requests_per_window,
                                               max_concurrent=max_concurrent,
                                               now_ms=wall_ms() if now_ms is None else now_ms))
    return q.quota_id, reply.status == "OK"


@dataclass(frozen=True)
class QuotaStatus:
    definition: QuotaDef
    created_at: int
    #: Admissions inside the sliding window ending now.
    in_window: int
    #: In-flight admissions (the concurrency counter) and the admitted executions.
    in_flight: int
    admitted: int
    waiting_count: int = 0
    waiting: list[tuple[str, int]] = field(default_factory=list)
    #: When the oldest admission in the window slides out (ms; 0 = window empty).
    oldest_expires_at: int = 0

    @property
    def quota_id(self) -> str:
        return self.definition.quota_id

    @property
    def rate_state(self) -> str:
        d = self.definition
        return "hard" if d.max_requests and self.in_window >= d.max_requests else "ok"

    @property
    def cap_state(self) -> str:
        d = self.definition
        return "hard" if d.cap and self.in_flight >= d.cap else "ok"

    @property
    def rate_pct(self) -> float:
        m = self.definition.max_requests
        return round(min(100.0, 100.0 * self.in_window / m), 1) if m else 0.0

    @property
    def cap_pct(self) -> float:
        c = self.definition.cap
        return round(min(100.0, 100.0 * self.in_flight / c), 1) if c else 0.0


def read_quotas(backend: Backend, quota_ids: Sequence[str], now_ms: int, *,
                waiting_limit: int = 0) -> list[QuotaStatus]:
    """Several policies in one round trip (unknown ids are left out)."""
    qks = [quota_keys(backend, q) for q in quota_ids]
    pipe = backend.client.pipeline(transaction=False)
    for q in qks:
        pipe.hmget(q.definition, [*DEF_FIELDS, "created_at"])
        pipe.get(q.concurrency)
        pipe.scard(q.admitted_set)
        pipe.zcard(keys.quota_blocked(q))
        pipe.zrange(keys.quota_blocked(q), 0, max(waiting_limit - 1, 0), withscores=True)
    raw = pipe.execute() if qks else []
    # The window count needs the definition (window length): a second round trip, one ZCOUNT each.
    defs: list[tuple[QuotaKeys, QuotaDef, list[Any]]] = []
    for i, q in enumerate(qks):
        row = raw[5 * i: 5 * i + 5]
        vals = [text(v) for v in row[0]]
        if not any(vals):
            continue
        defs.append((q, QuotaDef.from_fields(q.quota_id, vals[:4]), [vals[4], *row[1:]]))
    pipe = backend.client.pipeline(transaction=False)
    for q, d, _ in defs:
        lo = f"({now_ms - d.window_ms}"
        pipe.zcount(q.window(), lo, "+inf")
        pipe.zrangebyscore(q.window(), lo, "+inf", start=0, num=1, withscores=True)
    counts = pipe.execute() if defs else []
    out = []
    for i, (_q, d, (created, conc, admitted, nwait, waiting)) in enumerate(defs):
        oldest = counts[2 * i + 1]
        out.append(QuotaStatus(d, _int(str(created)), int(counts[2 * i]), _int(text(conc)), int(str(admitted)),
                               int(str(nwait)), [(text(m), int(s)) for m, s in waiting] if waiting_limit else [],
                               int(oldest[0][1]) + d.window_ms if oldest and d.window_ms else 0))
    return out


def get_quota(backend: Backend, quota_id: str, *, waiting_limit: int = 50) -> QuotaStatus | None:
    got = read_quotas(backend, [quota_id], backend.now_ms(), waiting_limit=waiting_limit)
    return got[0] if got else None


def list_quota_ids(backend: Backend, limit: int = 500) -> list[str]:
    pipe = backend.client.pipeline(transaction=False)
    for k in range(backend.settings.partitions.quota):
        pipe.smembers(QuotaKeys(k, "-").policies_index)
    return sorted(text(x) for s in pipe.execute() for x in s)[:limit]


def list_quotas(backend: Backend, limit: int = 500) -> list[QuotaStatus]:
    return read_quotas(backend, list_quota_ids(backend, limit), backend.now_ms())


def read_defs(backend: Backend, quota_ids: Sequence[str]) -> dict[str, QuotaDef]:
    """The definitions of several policies in one round trip (unknown ids are left out)."""
    pipe = backend.client.pipeline(transaction=False)
    for q in quota_ids:
        pipe.hmget(quota_keys(backend, q).definition, DEF_FIELDS)
    out = {}
    for q, vals in zip(quota_ids, pipe.execute() if quota_ids else [], strict=True):
        t = [text(v) for v in vals]
        if any(t):
            out[q] = QuotaDef.from_fields(q, t)
    return out
