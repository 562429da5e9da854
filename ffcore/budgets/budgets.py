"""Budgets: create, report usage, reset, and the status read per dimension (contract §5.31–§5.33).

A budget holds per-dimension usage against a soft limit (advisory: reported as a soft breach) and a
hard limit (a report that would cross it applies nothing; the scheduler stops granting executions
attached to a budget whose usage has reached it). Burn rate comes from usage snapshots of our own
(`keys.budget_samples`), taken by the budget sampler scanner whenever usage changed.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ffcore import events, keys
from ffcore import functions as F
from ffcore.backend import Backend
from ffcore.errors import InvalidInput, ScriptError
from ffcore.ids import new_uuid, parse_budget_id
from ffcore.keys import BudgetKeys
from ffcore.partition import budget_partition
from ffcore.reads import decode_map, text

#: Usage-hash fields that are markers, not dimensions (upstream's reconciler writes `breached_at`).
NOT_DIMENSIONS = frozenset({"_init", "breached_at"})
#: Usage snapshots kept per budget (approximate trim).
SAMPLES_MAXLEN = 2000
#: Burn rate is measured over this window.
BURN_WINDOW_MS = 15 * 60_000


def budget_keys(backend: Backend, budget_id: str) -> BudgetKeys:
    bid = parse_budget_id(budget_id)
    return BudgetKeys(budget_partition(bid, backend.settings.partitions.budget), bid)


def wall_ms() -> int:
    """The caller's clock for the "caller now" arguments (worker-sdk §3.5 sends the client's time)."""
    return int(time.time() * 1000)


def _num(v: str | None) -> int:
    try:
        return int(v or 0)
    except ValueError:
        try:
            return int(float(v or 0))
        except ValueError:
            return 0


# ------------------------------------------------------------------ writes
def _check_name(name: str) -> str:
    if not isinstance(name, str) or not name or any(ord(c) < 0x20 for c in name) or len(name) > 200:
        raise InvalidInput("invalid_input", [f"dimension name {name!r} must be 1..200 printable characters"])
    return name


def _check_limit(v: object, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise InvalidInput("invalid_input", [f"{what} must be a non-negative integer"])
    return v


def create_budget(
    backend: Backend, *, hard: Mapping[str, int], soft: Mapping[str, int] | None = None,
    reset_interval_ms: int = 0, budget_id: str | None = None, scope_type: str = "global", scope_id: str = "",
    enforcement_mode: str = "strict", on_hard_limit: str = "block", on_soft_limit: str = "warn",
    now_ms: int | None = None,
) -> tuple[str, bool]:
    """Create a budget (0 = no limit); returns (budget_id, created). An existing id is left unchanged."""
    soft = soft or {}
    dims = list(dict.fromkeys([*hard, *soft]))
    if not dims:
        raise InvalidInput("invalid_input", ["a budget needs at least one dimension"])
    hs, ss = [], []
    for d in dims:
        _check_name(d)
        h, s = _check_limit(hard.get(d, 0), f"hard limit of {d}"), _check_limit(soft.get(d, 0), f"soft limit of {d}")
        if h and s and s > h:
            raise InvalidInput("invalid_input", [f"soft limit of {d} ({s}) is above its hard limit ({h})"])
        hs.append(h)
        ss.append(s)
    _check_limit(reset_interval_ms, "reset_interval_ms")
    b = budget_keys(backend, budget_id or new_uuid())
    reply = backend.call(F.create_budget(
        b, scope_type=scope_type, scope_id=scope_id, enforcement_mode=enforcement_mode, on_hard_limit=on_hard_limit,
        on_soft_limit=on_soft_limit, reset_interval_ms=reset_interval_ms,
        now_ms=wall_ms() if now_ms is None else now_ms, dimensions=dims, hard=hs, soft=ss))
    return b.budget_id, reply.status == "OK"


@dataclass(frozen=True)
class UsageResult:
    """`status`: ok, already_applied, soft_breach (applied) or hard_breach (nothing applied)."""

    status: str
    dimension: str = ""
    current: int = 0
    limit: int = 0

    @property
    def applied(self) -> bool:
        return self.status in ("ok", "soft_breach")

    @property
    def hard_breach(self) -> bool:
        return self.status == "hard_breach"


def parse_usage_reply(reply: F.Reply) -> UsageResult:
    """worker-sdk §3.7: breach replies must carry a numeric current value and limit."""
    status = reply.status.lower()
    if status in ("ok", "already_applied"):
        return UsageResult(status)
    if status in ("soft_breach", "hard_breach"):
        f = reply.fields
        if len(f) < 3 or not f[1].lstrip("-").isdigit() or not f[2].lstrip("-").isdigit():
            raise ScriptError("unexpected_reply", [reply.status, *f], "ff_report_usage_and_check")
        return UsageResult(status, f[0], int(f[1]), int(f[2]))
    raise ScriptError("unexpected_reply", [reply.status], "ff_report_usage_and_check")


def usage_call(backend: Backend, budget_id: str, deltas: Mapping[str, int], dedup_key: str = "",
               now_ms: int | None = None) -> F.Call:
    items = [(_check_name(d), _check_limit(v, f"delta of {d}")) for d, v in deltas.items()]
    if not items:
        raise InvalidInput("invalid_input", ["report at least one dimension"])
    return F.report_usage_and_check(budget_keys(backend, budget_id), items,
                                    now_ms=wall_ms() if now_ms is None else now_ms, dedup_key=dedup_key)


def report_usage(backend: Backend, budget_id: str, deltas: Mapping[str, int], dedup_key: str = "",
                 now_ms: int | None = None) -> UsageResult:
    """Add `deltas`; all-or-nothing against hard limits; a repeated `dedup_key` (24 h) applies once."""
    result = parse_usage_reply(backend.call(usage_call(backend, budget_id, deltas, dedup_key, now_ms)))
    events.publish(backend, topics=["budgets", budget_id])  # gauges re-render (buffered, no round trip)
    return result


def reset_budget(backend: Backend, budget_id: str, now_ms: int | None = None) -> int:
    """Zero every usage dimension now; returns the next scheduled reset (0 = not recurring)."""
    b = budget_keys(backend, budget_id)
    reply = backend.call(F.reset_budget(b, now_ms=backend.now_ms() if now_ms is None else now_ms))
    events.publish(backend, topics=["budgets", budget_id])
    return _num(reply[0])


# ------------------------------------------------------------------ reads
@dataclass(frozen=True)
class Dimension:
    name: str
    usage: int
    soft: int
    hard: int
    #: Units per minute over the burn window (None = not enough samples).
    burn_per_min: float | None = None
    #: When the hard limit is reached at the current burn rate (ms; None = not projected).
    hard_at: int | None = None

    @property
    def state(self) -> str:
        """`hard` (the scheduler blocks), `soft` (past the advisory limit) or `ok`."""
        if self.hard > 0 and self.usage >= self.hard:
            return "hard"
        if self.soft > 0 and self.usage > self.soft:
            return "soft"
        return "ok"

    @property
    def scale(self) -> int:
        """The gauge's full scale: the hard limit, else the soft limit, else the usage itself."""
        return self.hard or self.soft or max(self.usage, 1)

    def pct(self, v: int) -> float:
        return round(min(100.0, 100.0 * v / self.scale), 1) if self.scale else 0.0

    @property
    def usage_pct(self) -> float:
        return self.pct(self.usage)

    @property
    def soft_pct(self) -> float:
        return self.pct(self.soft) if self.soft else 0.0


@dataclass(frozen=True)
class BudgetStatus:
    budget_id: str
    definition: dict[str, str]
    dimensions: list[Dimension]
    blocked_count: int = 0
    blocked: list[tuple[str, int]] = field(default_factory=list)
    #: When the budget reconciler first saw a lifetime budget at its hard limit (ms; 0 = not breached).
    breached_at: int = 0

    def __getitem__(self, name: str) -> str:
        # KeyError for non-fields and for names that are attributes, so Django templates fall back to those.
        if name in self.__dataclass_fields__ or hasattr(type(self), name):
            raise KeyError(name)
        return self.definition.get(name, "")

    @property
    def breached(self) -> list[Dimension]:
        """Dimensions at or over their hard limit: the scheduler holds attached executions back."""
        return [d for d in self.dimensions if d.state == "hard"]

    @property
    def state(self) -> str:
        states = {d.state for d in self.dimensions}
        return "hard" if "hard" in states else "soft" if "soft" in states else "ok"

    @property
    def next_reset_at(self) -> int:
        return _num(self.definition.get("next_reset_at"))


def dimensions_of(limits: dict[str, str], usage: dict[str, str]) -> list[Dimension]:
    names = [f[5:] for f in limits if f.startswith("hard:")]
    names += [f[5:] for f in limits if f.startswith("soft:") and f[5:] not in names]
    names += [u for u in usage if u not in names and u not in NOT_DIMENSIONS]
    return [Dimension(n, _num(usage.get(n)), _num(limits.get(f"soft:{n}")), _num(limits.get(f"hard:{n}")))
            for n in names]


def breached_dimension(limits: dict[str, str], usage: dict[str, str]) -> Dimension | None:
    """The first dimension whose usage reached its hard limit (scheduler rule: usage ≥ hard > 0)."""
    return next((d for d in dimensions_of(limits, usage) if d.state == "hard"), None)


def get_budget(backend: Backend, budget_id: str, *, blocked_limit: int = 50, with_burn: bool = True,
               now_ms: int | None = None) -> BudgetStatus | None:
    """Definition, per-dimension usage/limits (and burn), and the executions blocked on it; None if unknown."""
    got = read_budgets(backend, [budget_id], blocked_limit=blocked_limit)
    if not got:
        return None
    st = got[0]
    return with_burn_rates(backend, st, backend.now_ms() if now_ms is None else now_ms) if with_burn else st


def read_budgets(backend: Backend, budget_ids: Sequence[str], *, blocked_limit: int = 0) -> list[BudgetStatus]:
    """Several budgets in one round trip (unknown ids are left out)."""
    bks = [budget_keys(backend, b) for b in budget_ids]
    pipe = backend.client.pipeline(transaction=False)
    for b in bks:
        pipe.hgetall(b.definition)
        pipe.hgetall(b.limits)
        pipe.hgetall(b.usage)
        pipe.zcard(keys.budget_blocked(b))
        pipe.zrange(keys.budget_blocked(b), 0, max(blocked_limit - 1, 0), withscores=True)
    raw = pipe.execute() if bks else []
    out = []
    for i, b in enumerate(bks):
        d, lim, use, n, blocked = raw[5 * i: 5 * i + 5]
        if not d:
            continue
        usage = decode_map(use)
        out.append(BudgetStatus(b.budget_id, decode_map(d), dimensions_of(decode_map(lim), usage), int(n),
                                [(text(m), int(s)) for m, s in blocked] if blocked_limit else [],
                                _num(usage.get("breached_at"))))
    return out


def list_budget_ids(backend: Backend, limit: int = 500) -> list[str]:
    """Every budget id (from the per-partition `budget_policies` sets), sorted, at most `limit`."""
    pipe = backend.client.pipeline(transaction=False)
    for m in range(backend.settings.partitions.budget):
        pipe.smembers(BudgetKeys(m, "-").policies_index)
    return sorted(text(x) for s in pipe.execute() for x in s)[:limit]


def list_budgets(backend: Backend, limit: int = 500) -> list[BudgetStatus]:
    return read_budgets(backend, list_budget_ids(backend, limit))


# ------------------------------------------------------------------ burn rate
def with_burn_rates(backend: Backend, st: BudgetStatus, now_ms: int, window_ms: int = BURN_WINDOW_MS) -> BudgetStatus:
    """Per dimension: units/minute over the window (since the last reset inside it) and when the hard
    limit is reached at that rate."""
    b = budget_keys(backend, st.budget_id)
    pipe = backend.client.pipeline(transaction=False)
    pipe.xrevrange(keys.budget_samples(b), f"({now_ms - window_ms}" if window_ms < now_ms else "-", "-", count=1)
    pipe.xrange(keys.budget_samples(b), max(now_ms - window_ms, 0), "+", count=SAMPLES_MAXLEN)
    before, inside = pipe.execute()
    samples = [(int(text(sid).split("-")[0]), decode_map(f)) for sid, f in [*before, *inside]]
    dims = []
    for d in st.dimensions:
        rate, at = burn(samples, d, now_ms, window_ms)
        dims.append(Dimension(d.name, d.usage, d.soft, d.hard, rate, at))
    return BudgetStatus(st.budget_id, st.definition, dims, st.blocked_count, st.blocked, st.breached_at)


def burn(samples: list[tuple[int, dict[str, str]]], d: Dimension, now_ms: int,
         window_ms: int) -> tuple[float | None, int | None]:
    start = now_ms - window_ms
    base: tuple[int, int] | None = None
    prev = None
    for ts, fields in samples:
        if d.name not in fields:
            continue
        v = _num(fields[d.name])
        if base is None or (prev is not None and v < prev):  # a reset restarts the measurement
            base = (max(ts, start), v)
        prev = v
    if base is None or (prev is not None and d.usage < prev):
        return None, None
    elapsed = now_ms - base[0]
    if elapsed < 1000:
        return None, None
    per_ms = (d.usage - base[1]) / elapsed
    hard_at = None
    if per_ms > 0 and d.hard > 0 and d.usage < d.hard:
        hard_at = now_ms + int((d.hard - d.usage) / per_ms)
    return round(per_ms * 60_000, 2), hard_at


def sample_usage(backend: Backend, budget_ids: Sequence[str]) -> int:
    """Append a usage snapshot for each budget whose usage changed since its last one; returns how many."""
    bks = [budget_keys(backend, b) for b in budget_ids]
    if not bks:
        return 0
    pipe = backend.client.pipeline(transaction=False)
    for b in bks:
        pipe.hgetall(b.usage)
        pipe.xrevrange(keys.budget_samples(b), "+", "-", count=1)
    raw = pipe.execute()
    pipe = backend.client.pipeline(transaction=False)
    n = 0
    for i, b in enumerate(bks):
        usage = {k: v for k, v in decode_map(raw[2 * i]).items() if k not in NOT_DIMENSIONS}
        last = decode_map(raw[2 * i + 1][0][1]) if raw[2 * i + 1] else None
        if usage and usage != last:
            pipe.xadd(keys.budget_samples(b), dict(usage), maxlen=SAMPLES_MAXLEN, approximate=True)
            n += 1
    if n:
        pipe.execute()
    return n
