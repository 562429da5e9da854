"""Read models for the dashboard pages: reads through ffcore only, pipelined, never a keyspace scan."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ffcore import audit
from ffcore.backend import Backend
from ffcore.connection import display_url
from ffcore.engine import stats
from ffcore.execution import listing
from ffcore.execution.client import Client, Execution
from ffcore.execution.explain import Why, fmt_ms, why
from ffcore.keys import ExecKeys, PartitionKeys
from ffcore.library import CONTRACT_VERSION
from ffcore.reads import decode_map, text
from ffcore.upstream.reads import index_note, unavailable
from ffcore.worker.heartbeat import WorkerInfo
from ffcore.workers import list_workers

from . import charts, jsontree
from .sections import DETAIL_SECTIONS, VIEW_CAP_BYTES, ValueView, detail_section, view_bytes


@dataclass(frozen=True)
class SystemInfo:
    valkey_url: str
    server: str
    contract_version: str
    build_version: str
    flow_partitions: int
    budget_partitions: int
    quota_partitions: int


def system_info(backend: Backend) -> SystemInfo:
    from ffcore.library import loaded_versions

    p = backend.settings.partitions
    contract, build = loaded_versions(backend.client)
    return SystemInfo(
        valkey_url=display_url(backend.url), server=backend.server,
        contract_version=contract or "(not loaded)", build_version=build or "(none)",
        flow_partitions=p.flow, budget_partitions=p.budget, quota_partitions=p.quota,
    )


# ------------------------------------------------------------------ overview
#: Lane index suffix -> public state shown in the overview table.
INDEX_STATE = {"eligible": "waiting", "delayed": "delayed", "active": "active", "suspended": "suspended",
               "blocked:dependencies": "waiting_children", "blocked:budget": "rate_limited",
               "blocked:quota": "rate_limited", "blocked:route": "blocked", "blocked:operator": "blocked",
               "terminal": "finished"}
OVERVIEW_COLUMNS = ("waiting", "delayed", "active", "suspended", "waiting_children", "rate_limited", "blocked",
                    "finished")


@dataclass
class Overview:
    counts: list[tuple[str, list[int]]]
    totals: list[int]
    workers: list[WorkerInfo]
    expiring: list[dict[str, str]]
    failures: list[dict[str, str]]
    now_ms: int
    columns: tuple[str, ...] = OVERVIEW_COLUMNS
    #: The charts (dashboard/selectors/charts.py) drawn from the stats sampler's last hour.
    charts: dict[str, Any] = field(default_factory=dict)
    #: Sections that cannot be shown on this deployment -> the sentence shown instead (upstream mode).
    unavailable: dict[str, str] = field(default_factory=dict)


def overview(backend: Backend, expiring_window_ms: int = 15_000) -> Overview:
    lanes = Client(backend).lanes()
    raw = listing.count_by_lane_state(backend, lanes)
    rows = []
    totals = [0] * len(OVERVIEW_COLUMNS)
    for lane in lanes:
        vals = [0] * len(OVERVIEW_COLUMNS)
        for sfx, n in raw[lane].items():
            vals[OVERVIEW_COLUMNS.index(INDEX_STATE[sfx])] += n
        totals = [a + b for a, b in zip(totals, vals, strict=True)]
        rows.append((lane, vals))
    now = backend.now_ms()
    failures = listing.list_executions(backend, listing.Query(state="failed", limit=10), lanes).rows
    if failures:  # "Recent failures" shows the error: the reason the engine stored when it failed
        reasons = backend.read_many([("HMGET", ExecKeys(r["execution_id"]).core, "failure_reason", "failure_category")
                                     for r in failures])
        for r, (reason, category) in zip(failures, reasons, strict=True):
            r["failure_reason"], r["failure_category"] = text(reason), text(category)
    no_charts = unavailable(backend, "The charts", "they are drawn from this project's stats sampler, which runs "
                            "with our own scanners only")
    if no_charts:
        return Overview(rows, totals, list_workers(backend), expiring_leases(backend, now, expiring_window_ms),
                        failures, now, unavailable={"charts": no_charts})
    return Overview(rows, totals, list_workers(backend), expiring_leases(backend, now, expiring_window_ms), failures,
                    now, charts=charts.charts(stats.read_series(backend, lanes, now)))


def expiring_leases(backend: Backend, now: int, window_ms: int, limit: int = 20) -> list[dict[str, str]]:
    """Leases expiring within the window (soonest first), across partitions."""
    pipe = backend.client.pipeline(transaction=False)
    for n in range(backend.settings.partitions.flow):
        pipe.zrangebyscore(PartitionKeys(n).lease_expiry, now, now + window_ms, start=0, num=limit, withscores=True)
    found = sorted((sc, text(m)) for batch in pipe.execute() for m, sc in batch)[:limit]
    pipe = backend.client.pipeline(transaction=False)
    fields = ("execution_id", "execution_kind", "lane_id", "current_worker_id", "current_worker_instance_id",
              "lease_expires_at", "ownership_state")
    for _, eid in found:
        pipe.hmget(ExecKeys(eid).core, fields)
    return [dict(zip(fields, map(text, vals), strict=True)) for vals in (pipe.execute() if found else [])]


# ------------------------------------------------------------------ executions list
@dataclass
class ExecutionsPage:
    query: listing.Query
    page: listing.ListPage
    lanes: list[str]
    states: list[str]
    total: int | None
    #: A sentence about what the list cannot show (upstream mode: before the first reconciler pass).
    note: str = ""


def executions(backend: Backend, q: listing.Query) -> ExecutionsPage:
    lanes = Client(backend).lanes()
    page = listing.list_executions(backend, q, lanes)
    total = None
    if not (q.lane or q.state or q.kind or q.tag):
        total = listing.total_created(backend, page.partitions)  # the partitions the list merged
    return ExecutionsPage(q, page, lanes, list(listing.STATE_INDEXES), total, index_note(backend))


# ------------------------------------------------------------------ execution detail
@dataclass
class Detail:
    execution: Execution
    why: Why
    payload: ValueView
    result: ValueView
    lease: dict[str, str]
    policy: Any
    times: list[tuple[str, str]] = field(default_factory=list)
    now_ms: int = 0
    extras: dict[str, Any] = field(default_factory=dict)


TIME_FIELDS = (("created", "created_at"), ("started", "started_at"), ("completed", "completed_at"),
               ("last transition", "last_transition_at"), ("delay until", "delay_until"),
               ("lease acquired", "lease_acquired_at"), ("lease expires", "lease_expires_at"),
               ("last renewal", "lease_last_renewed_at"), ("progress updated", "progress_updated_at"))


def execution_detail(backend: Backend, eid: str) -> Detail | None:
    c = Client(backend)
    ex = c.get_execution(eid)
    if ex is None:
        return None
    k = ExecKeys(eid)
    pipe = backend.client.pipeline(transaction=False)
    pipe.get(k.payload)
    pipe.get(k.result)
    pipe.hgetall(k.lease_current)
    pipe.zscore(PartitionKeys(k.eid.partition_index).execution_deadline, eid)
    payload, result, lease, deadline = pipe.execute()
    policy = (jsontree.build(ex.policy) or ex.policy) if ex.policy else None
    times = [(label, fmt_ms(ex.core.get(f))) for label, f in TIME_FIELDS if fmt_ms(ex.core.get(f))]
    if deadline:
        times.append(("execution deadline", fmt_ms(int(deadline))))
    extras = {name: fn(backend, ex) for name, fn in DETAIL_SECTIONS.items()}
    serving = frozenset(lane for w in list_workers(backend) for lane in w.lanes)
    return Detail(ex, why(ex.core, serving), view_bytes(payload), view_bytes(result), decode_map(lease),
                  policy, times, backend.now_ms(), extras)


# ------------------------------------------------------------------ audit (the Workers page: selectors/workers.py)
def audit_page(backend: Backend, f: audit.AuditFilter, before: str | None = None) -> audit.AuditPage:
    return audit.page(backend, f, before=before)


__all__ = ["CONTRACT_VERSION", "DETAIL_SECTIONS", "VIEW_CAP_BYTES", "SystemInfo", "ValueView", "detail_section",
           "system_info", "view_bytes"]

# Area read models register their detail sections on import.
from . import budgets, flows, history, streams, waitpoints  # noqa: E402,F401
