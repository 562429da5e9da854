"""Every open waitpoint across the fleet, soonest timeout first, cursor-paged (the waitpoints inbox).

Sources are the contract's own indexes, so a Valkey written by any compatible client lists the same:
active waitpoints through the suspended executions of each lane (`L:suspended`, score = timeout_at or
9999999999999) and pending ones through `I:pending_waitpoint_expiry` (member = waitpoint id, score =
expires_at). An ascending k-way merge reads a few heads per index in one pipeline, refills only the
drained ones, and reads the page's records in two more pipelines. Cursors are `<score>|<member>`,
exclusive. No tokens are ever read here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ffcore.backend import Backend
from ffcore.errors import InvalidInput
from ffcore.execution.listing import lane_partition_map, merge, parse_cursor
from ffcore.functions.suspension import NO_TIMEOUT_SCORE
from ffcore.ids import ExecutionId
from ffcore.keys import ExecKeys, PartitionKeys
from ffcore.reads import decode_map, text
from ffcore.suspension.conditions import composite_matchers, describe_json, describe_names
from ffcore.suspension.signals import matcher_names
from ffcore.upstream.reads_waitpoints import composite_tree

CORE_FIELDS = ("execution_id", "lane_id", "execution_kind", "namespace", "public_state", "lifecycle_phase",
               "current_waitpoint_id", "blocking_reason")
WP_FIELDS = ("waitpoint_id", "execution_id", "waitpoint_key", "state", "created_at", "activated_at", "expires_at",
             "signal_count", "matched_signal_count", "last_signal_at")
SUSP_FIELDS = ("suspension_id", "reason_code", "timeout_at", "timeout_behavior", "created_at", "closed_at",
               "resume_condition_json", "composite_tree_json")
STATES = ("pending", "active")


@dataclass(frozen=True)
class InboxQuery:
    lane: str | None = None
    kind: str | None = None
    #: "pending" or "active" (None: both).
    state: str | None = None
    #: Only waitpoints expecting this signal name (wildcards included).
    signal: str | None = None
    execution: str | None = None
    cursor: str | None = None
    limit: int = 50


@dataclass
class WaitpointRow:
    execution_id: str
    waitpoint_id: str
    state: str
    lane: str = ""
    kind: str = ""
    namespace: str = ""
    public_state: str = ""
    waitpoint_key: str = ""
    created_at: int = 0
    #: Suspension timeout (active) or pending expiry, ms; None when there is none.
    timeout_at: int | None = None
    timeout_behavior: str = ""
    reason_code: str = ""
    #: Expected signal names in matcher order; "" is a wildcard. Empty for pending waitpoints (set at suspend).
    names: list[str] = field(default_factory=list)
    satisfied: list[bool] = field(default_factory=list)
    match_mode: str = ""
    minimum: int = 1
    signal_count: int = 0
    matched_count: int = 0
    #: The resume condition in words ("any of approve, reject", "2 of 3 approvers: approve", ...).
    condition_words: str = ""

    @property
    def matchers(self) -> list[tuple[str, bool]]:
        return list(zip(self.names, self.satisfied, strict=False))

    @property
    def wildcard(self) -> bool:
        return "" in self.names

    @property
    def expected(self) -> str:
        """The first signal name still awaited ("" when none is named): what a signal form offers first."""
        waiting = [n for n, done in self.matchers if n and not done]
        return waiting[0] if waiting else next((n for n in self.names if n), "")

    def expects(self, name: str) -> bool:
        return self.state == "pending" or self.wildcard or name in self.names


@dataclass
class InboxPage:
    rows: list[WaitpointRow]
    next_cursor: str | None
    examined: int = 0


def _int(v: str) -> int | None:
    return int(v) if v.lstrip("-").isdigit() else None


# ------------------------------------------------------------------ rows
def _condition(row: WaitpointRow, cond: dict[str, str]) -> None:
    row.names = matcher_names(cond)
    row.satisfied = [cond.get(f"matcher:{i}:satisfied") == "1" for i in range(len(row.names))]
    row.match_mode = cond.get("match_mode", "")
    row.minimum = _int(cond.get("minimum_signal_count", "")) or 1
    if row.names:
        row.condition_words = describe_names(row.names, row.match_mode, row.minimum)


def _composite(row: WaitpointRow, susp: dict[str, str], tokens: set[str], tree: str, upstream: bool) -> None:
    """A composite suspension (several waitpoints, or upstream's tree on one): words for the whole tree,
    matchers over its leaves ticked from the suspension's satisfied set."""
    row.condition_words = describe_json(susp["resume_condition_json"])
    row.match_mode = "composite"
    row.names, row.satisfied = [], []
    for _key, name, done in composite_matchers(tree, tokens, upstream=upstream):
        row.names.append(name)
        row.satisfied.append(done)


def _apply_core(row: WaitpointRow, core: dict[str, str]) -> None:
    row.lane, row.kind = core["lane_id"] or "default", core["execution_kind"]
    row.namespace, row.public_state = core["namespace"], core["public_state"]


def _apply_wp(row: WaitpointRow, wp: dict[str, str]) -> None:
    row.waitpoint_key, row.created_at = wp["waitpoint_key"], _int(wp["created_at"]) or 0
    row.signal_count = _int(wp["signal_count"]) or 0
    row.matched_count = _int(wp["matched_signal_count"]) or 0


def read_rows(backend: Backend, members: Sequence[tuple[str, int, str]]) -> list[WaitpointRow | None]:
    """Rows for (kind, partition, member) triples: kind "exec" (member = eid of a suspended execution) or
    "pending" (member = waitpoint id). None where the record vanished meanwhile. Two pipelines."""
    pipe = backend.client.pipeline(transaction=False)
    for kind, n, m in members:
        if kind == "exec":
            pipe.hmget(ExecKeys(m).core, CORE_FIELDS)
        else:
            pipe.hmget(PartitionKeys(n).waitpoint(m), WP_FIELDS)
    first = [list(map(text, v)) for v in pipe.execute()] if members else []
    pipe = backend.client.pipeline(transaction=False)
    plan: list[tuple[str, dict[str, str]] | None] = []
    for (kind, _n, m), vals in zip(members, first, strict=True):
        if kind == "exec":
            core = dict(zip(CORE_FIELDS, vals, strict=True))
            w = core["current_waitpoint_id"]
            if core["lifecycle_phase"] != "suspended" or not w:
                plan.append(None)
                continue
            k = ExecKeys(m)
            pipe.hmget(k.idx.waitpoint(w), WP_FIELDS)
            pipe.hmget(k.suspension_current, SUSP_FIELDS)
            pipe.hgetall(k.idx.waitpoint_condition(w))
            pipe.smembers(k.suspension_satisfied_set)
            plan.append(("exec", core))
        else:
            wp = dict(zip(WP_FIELDS, vals, strict=True))
            try:
                eid = ExecutionId(wp["execution_id"])
            except ValueError:
                plan.append(None)
                continue
            if wp["state"] != "pending":
                plan.append(None)
                continue
            pipe.hmget(ExecKeys(eid).core, CORE_FIELDS)
            plan.append(("pending", wp))
    second = iter(pipe.execute() if any(plan) else [])
    out: list[WaitpointRow | None] = []
    for (_kind, _n, m), p in zip(members, plan, strict=True):
        if p is None:
            out.append(None)
            continue
        if p[0] == "exec":
            core = p[1]
            wp = dict(zip(WP_FIELDS, map(text, next(second)), strict=True))
            susp = dict(zip(SUSP_FIELDS, map(text, next(second)), strict=True))
            cond = decode_map(next(second))
            tokens = {text(t) for t in next(second)}
            row = WaitpointRow(m, core["current_waitpoint_id"], "active", timeout_at=_int(susp["timeout_at"]),
                               timeout_behavior=susp["timeout_behavior"], reason_code=susp["reason_code"])
            _apply_core(row, core)
            _apply_wp(row, wp)
            _condition(row, cond)
            tree, upstream = composite_tree(susp, cond)
            if tree and (cond.get("composite") == "1" or not cond):
                _composite(row, susp, tokens, tree, upstream)
        else:
            wp = p[1]
            core = dict(zip(CORE_FIELDS, map(text, next(second)), strict=True))
            if not core["execution_id"]:
                out.append(None)
                continue
            row = WaitpointRow(wp["execution_id"], m, "pending", timeout_at=_int(wp["expires_at"]))
            _apply_core(row, core)
            _apply_wp(row, wp)
        out.append(row)
    return out


def _keep(q: InboxQuery, row: WaitpointRow | None) -> bool:
    if row is None:
        return False
    return ((q.lane is None or row.lane == q.lane) and (q.kind is None or row.kind == q.kind)
            and (q.state is None or row.state == q.state) and (q.signal is None or row.expects(q.signal)))


def open_waitpoints(backend: Backend, q: InboxQuery, lanes: Sequence[str]) -> InboxPage:
    """One page of open waitpoints, soonest timeout first (no timeout last)."""
    if not 1 <= q.limit <= 500:
        raise InvalidInput("invalid_input", ["limit must be within 1..500"])
    if q.state is not None and q.state not in STATES:
        raise InvalidInput("invalid_input", [f"state {q.state!r} is not one of {', '.join(STATES)}"])
    if q.execution:
        return _of_execution(backend, q)
    use = [q.lane] if q.lane else list(lanes)
    # Only partitions known to hold executions of these lanes (every partition for unregistered lanes).
    by_lane = lane_partition_map(backend, use)
    parts = sorted({n for ns in by_lane.values() for n in ns}) or range(backend.settings.partitions.flow)
    sources: list[tuple[str, int, str]] = []  # (kind, partition, key)
    if q.state in (None, "active"):
        sources += [("exec", n, PartitionKeys(n).lane(lane).suspended) for lane in use for n in by_lane[lane]]
    if q.state in (None, "pending"):
        sources += [("pending", n, PartitionKeys(n).pending_waitpoint_expiry) for n in parts]
    rows: dict[tuple[int, str], WaitpointRow] = {}

    def accept(batch: list[tuple[float, str, int]]) -> list[bool]:
        got = read_rows(backend, [(sources[i][0], sources[i][1], m) for _, m, i in batch])
        flags = []
        for (_, m, i), row in zip(batch, got, strict=True):
            ok = _keep(q, row)
            if ok and row is not None:
                rows[(i, m)] = row
            flags.append(ok)
        return flags

    found, cursor, examined = merge(backend, [s[2] for s in sources], parse_cursor(q.cursor), q.limit, accept,
                                    descending=False)
    return InboxPage([rows[(i, m)] for _, m, i in found], cursor, examined)


def _of_execution(backend: Backend, q: InboxQuery) -> InboxPage:
    """The open waitpoints of one execution: its active one and the pending ones it created."""
    k = ExecKeys(q.execution or "")
    members: list[tuple[str, int, str]] = [("exec", k.eid.partition_index, k.eid)]
    ids = sorted(text(w) for w in backend.client.sscan_iter(k.waitpoints, count=100))
    members += [("pending", k.eid.partition_index, w) for w in ids]
    got = [r for r in read_rows(backend, members) if _keep(q, r)]
    seen: set[str] = set()
    uniq = []
    for r in got:
        if r is not None and r.waitpoint_id not in seen:
            seen.add(r.waitpoint_id)
            uniq.append(r)
    uniq.sort(key=lambda r: (r.timeout_at or NO_TIMEOUT_SCORE, r.waitpoint_id))
    return InboxPage(uniq, None, len(members))


def list_suspended(backend: Backend, lanes: Sequence[str], *, lane: str | None = None, cursor: str | None = None,
                   limit: int = 50) -> InboxPage:
    """Every suspended execution with its active waitpoint, fleet-wide, cursor-paged."""
    return open_waitpoints(backend, InboxQuery(lane=lane, state="active", cursor=cursor, limit=limit), lanes)
