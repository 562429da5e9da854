"""Per-execution spend on budgets (operations §9.4 record_spend, §9.5 release_budget).

`record_spend` adds deltas to a budget's usage under the rules of a usage report (hard limits checked
first: a breach applies nothing; soft breach advisory; an idempotency key applies once in 24 h) and
also to the execution's ledger on that budget (`by_exec:<eid>`, listed in `by_exec:index`).
`release_budget` gives an execution's ledger back: usage minus the ledger (never below 0), ledger gone.

When spend is released (our reading of the seeds; issue #24 item 5): an execution that ends **failed,
cancelled, expired or skipped** gives its spend back — its work produced nothing the budget should keep
paying for — while a **successful** execution's spend stays. A worker's own terminal failure / cancel
releases at once the budgets it recorded spend on in that attempt; the budget reconciler
(`ffcore.engine.budget_scanners.BudgetReconciler`) releases every other ledger of such executions (any
door: operator cancel, bulk, flow cascade, expiry, an upstream client) within one tick. A retry keeps
the ledger: the execution has not ended.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ffcore import events
from ffcore import functions as F
from ffcore.backend import Backend
from ffcore.budgets.budgets import (
    UsageResult,
    _check_name,
    budget_keys,
    list_budget_ids,
    parse_usage_reply,
    wall_ms,
)
from ffcore.errors import InvalidInput
from ffcore.execution import journal
from ffcore.ids import ExecutionId, parse_budget_id
from ffcore.keys import ExecKeys
from ffcore.reads import decode_map, text

#: Terminal outcomes whose spend is given back (success keeps its spend).
RELEASED_OUTCOMES = frozenset({"failed", "cancelled", "expired", "skipped"})
#: Largest delta (exact in the library's Lua doubles).
MAX_DELTA = 2**53 - 1
#: Bounds of one call (ours).
MAX_DIMENSIONS = 64
MAX_IDEMPOTENCY_CHARS = 512
#: Ledgers read per budget page / listing at most.
LEDGERS_READ = 1000


def check_deltas(deltas: Mapping[str, int]) -> list[tuple[str, int]]:
    if not isinstance(deltas, Mapping) or not deltas:
        raise InvalidInput("invalid_input", ["deltas: give at least one dimension"])
    if len(deltas) > MAX_DIMENSIONS:
        raise InvalidInput("invalid_input", [f"deltas: at most {MAX_DIMENSIONS} dimensions"])
    out = []
    for d, v in sorted(deltas.items()):
        _check_name(d)
        if d in ("breached_at", "_init"):
            raise InvalidInput("invalid_input", [f"deltas.{d}: a reserved name, not a dimension"])
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_DELTA:
            raise InvalidInput("invalid_input", [f"deltas.{d}: must be an integer within 0..{MAX_DELTA}"])
        out.append((d, v))
    return out


def check_spend(backend: Backend, budget_id: str, deltas: Mapping[str, int]) -> list[tuple[str, int]]:
    """`check_deltas`, and every dimension must be one the budget defines: spend on a name the budget has no
    limit for would start a new, unlimited row nobody watches (issue #36). An unknown budget passes here
    and is refused by the FCALL (`BudgetNotFound`)."""
    items = check_deltas(deltas)
    limits = backend.client.hgetall(budget_keys(backend, parse_budget_id(budget_id)).limits)
    defined = {text(f)[5:] for f in limits if text(f).startswith("hard:")}
    unknown = [d for d, _ in items if defined and d not in defined]
    if unknown:
        raise InvalidInput("invalid_input", [f"deltas.{d}: not a dimension of this budget (it defines "
                                             f"{', '.join(sorted(defined))})" for d in unknown])
    return items


def record_spend(backend: Backend, budget_id: str, execution_id: str, deltas: Mapping[str, int],
                 idempotency_key: str = "", *, now_ms: int | None = None) -> UsageResult:
    """Add `deltas` to the budget's usage and to the execution's ledger on it (all or nothing against
    hard limits). A repeated non-empty `idempotency_key` applies once (24 h): `already_applied`.
    Unknown budget → `BudgetNotFound`; a dimension the budget does not define → `InvalidInput`."""
    bid = parse_budget_id(budget_id)
    eid = ExecutionId(execution_id)
    # Checked here, not in the doors, so the SDK, REST and any page get the same refusal. The limits are read
    # just before the FCALL: a budget is never redefined in place (create leaves an existing id unchanged).
    items = check_spend(backend, bid, deltas)
    if not isinstance(idempotency_key, str) or len(idempotency_key) > MAX_IDEMPOTENCY_CHARS:
        raise InvalidInput("invalid_input", [f"idempotency_key: text of at most {MAX_IDEMPOTENCY_CHARS} characters"])
    call = F.record_spend(budget_keys(backend, bid), str(eid), items,
                          now_ms=wall_ms() if now_ms is None else now_ms, dedup_key=idempotency_key)
    result = parse_usage_reply(backend.call(call))
    if result.applied:  # (a hard breach or a repeat changed nothing)
        journal.note(backend, eid, "spend", budget=str(bid), deltas=" ".join(f"{d}={v}" for d, v in items),
                     outcome=result.status)
    events.publish(backend, ids=[eid], topics=["budgets", bid])
    return result


def release_budget(backend: Backend, budget_id: str, execution_id: str) -> bool:
    """Give the execution's ledger on this budget back; False when it had none (a no-op)."""
    bid = parse_budget_id(budget_id)
    eid = ExecutionId(execution_id)
    reply = backend.call(F.release_budget(budget_keys(backend, bid), str(eid)))
    if reply[0] == "released":
        events.publish(backend, ids=[eid], topics=["budgets", bid])
        return True
    return False


def release_many(backend: Backend, pairs: Sequence[tuple[str, str]]) -> int:
    """(budget_id, eid) pairs released in one pipeline; returns how many had a ledger."""
    if not pairs:
        return 0
    replies = backend.call_many([F.release_budget(budget_keys(backend, b), e) for b, e in pairs])
    done = [(b, e) for (b, e), r in zip(pairs, replies, strict=True)
            if isinstance(r, F.Reply) and r.fields[:1] == ["released"]]
    if done:
        events.publish(backend, ids=[ExecutionId(e) for _, e in done], topics=["budgets", *{b for b, _ in done}])
    return len(done)


# ------------------------------------------------------------------ reads
@dataclass(frozen=True)
class Ledger:
    """One execution's attributed spend on one budget."""

    budget_id: str
    execution_id: str
    spend: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.spend.values())


def _ints(m: Mapping[str, str]) -> dict[str, int]:
    out = {}
    for k, v in sorted(m.items()):
        try:
            out[k] = int(v)
        except ValueError:
            out[k] = 0
    return out


def spend_of_execution(backend: Backend, execution_id: str, budget_ids: Iterable[str] | None = None) -> list[Ledger]:
    """The execution's ledgers, one per budget it has spent on (every budget is looked at unless
    `budget_ids` narrows it: one pipeline over the budget ids, no scan of executions)."""
    eid = str(ExecutionId(execution_id))
    ids = list(budget_ids) if budget_ids is not None else list_budget_ids(backend, limit=10_000)
    if not ids:
        return []
    pipe = backend.client.pipeline(transaction=False)
    for b in ids:
        pipe.hgetall(budget_keys(backend, b).by_exec(eid))
    return [Ledger(b, eid, _ints(decode_map(raw))) for b, raw in zip(ids, pipe.execute(), strict=True) if raw]


def ledgers_of_budget(backend: Backend, budget_id: str, limit: int = 50) -> tuple[int, list[Ledger]]:
    """(how many executions have a ledger, up to `limit` of them by total spend, largest first). Past
    `LEDGERS_READ` ledgers the largest are looked for among that many picked at random (a bounded read)."""
    b = budget_keys(backend, parse_budget_id(budget_id))
    pipe = backend.client.pipeline(transaction=False)
    pipe.scard(b.by_exec_index)
    pipe.srandmember(b.by_exec_index, LEDGERS_READ)
    count, members = pipe.execute()
    eids = sorted(text(e) for e in members)
    if not eids:
        return int(count), []
    pipe = backend.client.pipeline(transaction=False)
    for e in eids:
        pipe.hgetall(b.by_exec(e))
    rows = [Ledger(b.budget_id, e, _ints(decode_map(raw))) for e, raw in zip(eids, pipe.execute(), strict=True)]
    rows.sort(key=lambda r: (-r.total, r.execution_id))
    return int(count), rows[:limit]


def releasable(backend: Backend, eids: Sequence[str]) -> list[bool]:
    """Per eid: has it ended with an outcome whose spend is given back (missing cores: False)."""
    if not eids:
        return []
    pipe = backend.client.pipeline(transaction=False)
    for e in eids:
        pipe.hmget(ExecKeys(e).core, ["lifecycle_phase", "terminal_outcome"])
    return [text(p) == "terminal" and text(o) in RELEASED_OUTCOMES for p, o in pipe.execute()]
