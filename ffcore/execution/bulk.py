"""Bulk operator actions over a filtered set: exact collection, batched execution, durable progress.

Progress and per-item results live in Valkey (`ff:bulk:<job>` hash and `:results` list, kept for a
day) so any dashboard process can show them while one process runs the job.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from ffcore import events, keys
from ffcore import functions as F
from ffcore.backend import Backend
from ffcore.errors import InvalidId, ScriptError
from ffcore.execution import listing
from ffcore.execution.client import Client
from ffcore.functions import Signal
from ffcore.ids import new_uuid
from ffcore.keys import ExecKeys
from ffcore.reads import core_refs_many, decode_map, text
from ffcore.suspension.inbox import InboxQuery, WaitpointRow, open_waitpoints

#: Largest set one bulk action may touch; bigger sets must be narrowed first.
BULK_CAP = 10_000
JOB_TTL_S = 86_400
BATCH = 100


@dataclass(frozen=True)
class Collected:
    eids: list[str]
    capped: bool


def collect(backend: Backend, q: listing.Query, lanes: Sequence[str], cap: int = BULK_CAP) -> Collected:
    """Every execution matching the filters, in list order, up to `cap` (+1 to know it was capped)."""
    out: list[str] = []
    cursor = None
    while len(out) <= cap:
        # Every filter of the list (a created range too), forward from the first page.
        page = listing.list_executions(backend, replace(q, cursor=cursor, limit=500, direction="next"), lanes)
        out += [r["execution_id"] for r in page.rows]
        if not page.next_cursor:
            break
        cursor = page.next_cursor
    return Collected(out[:cap], len(out) > cap)


def start_job(backend: Backend, *, action: str, actor: str, reason: str, total: int) -> str:
    job = new_uuid()
    k = keys.bulk_job(job)
    backend.client.hset(k, mapping={"action": action, "actor": actor, "reason": reason, "total": total, "done": 0,
                                    "ok": 0, "failed": 0, "state": "running", "started_at": backend.now_ms()})
    backend.client.expire(k, JOB_TTL_S)
    return job


def run_job(backend: Backend, job: str, action: str, eids: Sequence[str], reason: str,
            on_batch: Callable[[list[tuple[str, bool, str]]], None] | None = None) -> None:
    """Apply `action` ("cancel" | "replay") to every eid in batches, recording each result."""
    c = Client(backend)
    k, rk = keys.bulk_job(job), keys.bulk_results(job)
    for start in range(0, len(eids), BATCH):
        batch = list(eids[start:start + BATCH])
        if action == "cancel":
            eks = [ExecKeys(e) for e in batch]
            refs = core_refs_many(backend, eks)
            replies = backend.call_many([F.cancel_execution(ek, r, reason=reason) for ek, r in zip(eks, refs,
                                                                                                  strict=True)])
        else:
            replies = []
            for e in batch:
                try:
                    replies.append(c.replay(e))
                except ScriptError as err:
                    replies.append(err)
        pipe = backend.client.pipeline(transaction=False)
        ok = 0
        results = []
        for e, r in zip(batch, replies, strict=True):
            good = not isinstance(r, ScriptError)
            code = r.code if isinstance(r, ScriptError) else "ok"
            ok += good
            results.append((e, good, code))
            pipe.rpush(rk, json.dumps({"id": e, "ok": good, "code": code}))
        pipe.hincrby(k, "done", len(batch))
        pipe.hincrby(k, "ok", ok)
        pipe.hincrby(k, "failed", len(batch) - ok)
        pipe.expire(rk, JOB_TTL_S)
        pipe.execute()
        events.publish(backend, ids=[e for e, good, _ in results if good])  # live pages re-render them
        if on_batch is not None:
            on_batch(results)
    backend.client.hset(k, mapping={"state": "finished", "finished_at": backend.now_ms()})


def collect_waitpoints(backend: Backend, q: InboxQuery, lanes: Sequence[str],
                       cap: int = BULK_CAP) -> CollectedWaitpoints:
    """Every open waitpoint matching the inbox filters (execution id, waitpoint id), in inbox order, up to `cap`
    (+1 to know it was capped); `expecting` counts those whose condition names `signal` (or any signal)."""
    out: list[WaitpointRow] = []
    cursor = None
    while len(out) <= cap:
        page = open_waitpoints(backend, replace(q, cursor=cursor, limit=500), lanes)
        out += page.rows
        if not page.next_cursor:
            break
        cursor = page.next_cursor
    return CollectedWaitpoints([(r.execution_id, r.waitpoint_id) for r in out[:cap]], len(out) > cap,
                               [r.state == "active" and r.wildcard for r in out[:cap]],
                               [r.names for r in out[:cap]])


@dataclass(frozen=True)
class CollectedWaitpoints:
    targets: list[tuple[str, str]]
    capped: bool
    #: Per target: an active waitpoint matching any signal name.
    wildcard: list[bool] = field(default_factory=list)
    #: Per target: the signal names its condition expects ([] for a pending waitpoint).
    names: list[list[str]] = field(default_factory=list)

    def expecting(self, signal_name: str) -> int:
        return sum(w or signal_name in n for w, n in zip(self.wildcard, self.names, strict=True))


def run_signal_job(backend: Backend, job: str, targets: Sequence[tuple[str, str]], signal: Signal,
                   on_batch: Callable[[list[tuple[str, bool, str]]], None] | None = None) -> None:
    """Deliver `signal` to every (execution id, waitpoint id) with the waitpoint's stored token, in batches,
    recording each result like `run_job` (the result's code is the signal's effect, or the refusal)."""
    from ffcore.suspension.signals import Signals

    sig = Signals(backend)
    k, rk = keys.bulk_job(job), keys.bulk_results(job)
    for start in range(0, len(targets), BATCH):
        results: list[tuple[str, bool, str]] = []
        for n, (eid, wid) in enumerate(targets[start:start + BATCH], start):
            try:
                # One idempotency key per target and job: a retried job delivers each signal once.
                out = sig.deliver_with_stored_token(eid, wid, replace(signal, idempotency_key=f"{job}:{n}"))
                results.append((eid, True, "duplicate" if out.duplicate else out.effect))
            except (ScriptError, InvalidId) as err:
                results.append((eid, False, err.code if isinstance(err, ScriptError) else "invalid_id"))
        _record(backend, k, rk, results)
        if on_batch is not None:
            on_batch(results)
    backend.client.hset(k, mapping={"state": "finished", "finished_at": backend.now_ms()})


def _record(backend: Backend, k: str, rk: str, results: list[tuple[str, bool, str]]) -> None:
    pipe = backend.client.pipeline(transaction=False)
    for e, good, code in results:
        pipe.rpush(rk, json.dumps({"id": e, "ok": good, "code": code}))
    ok = sum(good for _, good, _ in results)
    pipe.hincrby(k, "done", len(results))
    pipe.hincrby(k, "ok", ok)
    pipe.hincrby(k, "failed", len(results) - ok)
    pipe.expire(rk, JOB_TTL_S)
    pipe.execute()


def fail_job(backend: Backend, job: str, error: str) -> None:
    """Mark a job that stopped on an unexpected error as finished, with the error for its progress page."""
    backend.client.hset(keys.bulk_job(job), mapping={"state": "finished", "error": error[:300]})


@dataclass(frozen=True)
class JobStatus:
    job: str
    fields: dict[str, str]
    results: list[dict[str, object]]

    @property
    def total(self) -> int:
        return int(self.fields.get("total") or 0)

    @property
    def done(self) -> int:
        return int(self.fields.get("done") or 0)

    @property
    def finished(self) -> bool:
        return self.fields.get("state") == "finished"


def status(backend: Backend, job: str, results_limit: int = 1000) -> JobStatus | None:
    pipe = backend.client.pipeline(transaction=False)
    pipe.hgetall(keys.bulk_job(job))
    pipe.lrange(keys.bulk_results(job), 0, results_limit - 1)
    fields, raw = pipe.execute()
    if not fields:
        return None
    return JobStatus(job, decode_map(fields), [json.loads(text(x)) for x in raw])
