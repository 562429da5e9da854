"""Admission: the scheduler's gate before a claim grant (capability → budget → quota), the blocks it
writes, the release of quota admission, and the unblocking of executions whose blocker cleared.

Attachment. An execution is attached through its policy (`budget_ids`, a contract field, and our
`quota_policy_id` extension — both stored atomically by `ff_create_execution`) and through the core
fields `budget_ids` / `quota_policy_id` that upstream's scheduler reads (contract §4.1); `Client`
writes those right after the create. The gate reads both, so an execution is never claimable
un-gated, and executions created by upstream clients (core fields only) are gated too.

Concurrency accounting. The library counts in-flight admissions (`Q:concurrency`) next to the set of
admitted executions (`Q:admitted_set`). Releases are idempotent here: a release runs only while the
execution is still in the set (WATCH on the set), so two releasers can never both decrement. Slots
come back (1) when the holder's attempt ends (the task's terminal ops), (2) when a claim on a fresh
admission did not happen and nobody else holds the execution, (3) from the quota reconciler for
admitted executions that are idle — finished (operator cancel, expiry), suspended, or blocked/delayed
with no grant — re-checked under WATCH of the execution's core on a standalone server. Drift can only
over-count (two claimers admitting the same execution), which never grants past a cap; the
reconciler trims the counter back to the set's size.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis

from ffcore import events, keys, metrics, routing
from ffcore import functions as F
from ffcore.backend import Backend
from ffcore.budgets.budgets import budget_keys, dimensions_of
from ffcore.budgets.quotas import QuotaDef, quota_keys, read_defs
from ffcore.errors import InvalidId, ScriptError
from ffcore.ids import ExecutionId, parse_uuid
from ffcore.keys import ExecKeys
from ffcore.policy import parse_stored_policy
from ffcore.reads import decode_map, text

log = logging.getLogger("ffcore.budgets.admission")

#: Core fields the gate and the unblock reconciler read.
CORE_FIELDS = ("budget_ids", "quota_policy_id", "required_capabilities")
_DETAIL_REF = re.compile(r"^(budget|quota) ([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\b")
#: Blocking reason -> the lane blocked set the library keeps it in.
BLOCKED_INDEX = {"waiting_for_budget": "blocked:budget", "waiting_for_quota": "blocked:quota",
                 "waiting_for_capable_worker": "blocked:route"}


# ------------------------------------------------------------------ attachments
@dataclass(frozen=True)
class Attachments:
    budget_ids: tuple[str, ...] = ()
    quota_id: str = ""

    def __bool__(self) -> bool:
        return bool(self.budget_ids or self.quota_id)


def _ids(raw: Any) -> list[str]:
    if isinstance(raw, str):
        s = raw.strip()
        if s.startswith("["):
            try:
                raw = json.loads(s)
            except ValueError:
                return []
        else:
            raw = [x.strip() for x in s.split(",")]
    out = []
    for x in raw if isinstance(raw, list) else []:
        try:
            out.append(parse_uuid(str(x), "budget id"))
        except InvalidId:
            continue
    return out


def attachments(core: Mapping[str, str], policy: Mapping[str, Any]) -> Attachments:
    """Budgets and quota from the core fields (CSV or JSON list) and the stored policy, unioned."""
    budgets = list(dict.fromkeys([*_ids(core.get("budget_ids", "")), *_ids(policy.get("budget_ids") or [])]))
    quota = core.get("quota_policy_id") or policy.get("quota_policy_id") or ""
    try:
        quota = parse_uuid(str(quota), "quota policy id") if quota else ""
    except InvalidId:
        quota = ""
    return Attachments(tuple(budgets), quota)


def core_fields(policy_json: str) -> dict[str, str]:
    """The core fields upstream's scheduler reads, from a stored policy (empty when not attached)."""
    a = attachments({}, parse_stored_policy(policy_json))
    out = {}
    if a.budget_ids:
        out["budget_ids"] = ",".join(a.budget_ids)
    if a.quota_id:
        out["quota_policy_id"] = a.quota_id
    return out


def blocker(core: Mapping[str, str]) -> tuple[str, str] | None:
    """("budget" | "quota", id) named by a block's detail, if the execution is blocked by one."""
    if core.get("eligibility_state") not in ("blocked_by_budget", "blocked_by_quota"):
        return None
    m = _DETAIL_REF.match(core.get("blocking_detail", ""))
    return (m.group(1), m.group(2)) if m else None


# ------------------------------------------------------------------ reads shared by the gate and unblock
@dataclass
class _Facts:
    """Budget limits/usage and quota definitions for one decision round (one round trip)."""

    now_ms: int
    budgets: dict[str, tuple[dict[str, str], dict[str, str]]] = field(default_factory=dict)
    quotas: dict[str, QuotaDef] = field(default_factory=dict)

    def breach(self, budget_ids: Iterable[str]) -> str | None:
        """The detail line of the first attached budget at a hard limit; unknown budgets never block."""
        for bid in budget_ids:
            limits, usage = self.budgets.get(bid, ({}, {}))
            for d in dimensions_of(limits, usage):
                if d.state == "hard":
                    return f"budget {bid}: {d.name} at its hard limit ({d.usage}/{d.hard})"
        return None


def _read_facts(backend: Backend, budget_ids: Sequence[str], quota_ids: Sequence[str]) -> _Facts:
    pipe = backend.client.pipeline(transaction=False)
    bks = [budget_keys(backend, b) for b in budget_ids]
    for b in bks:
        pipe.hgetall(b.limits)
        pipe.hgetall(b.usage)
    now, raw = backend.execute_timed(pipe)
    facts = _Facts(now)
    for i, b in enumerate(bks):
        facts.budgets[b.budget_id] = (decode_map(raw[2 * i]), decode_map(raw[2 * i + 1]))
    if quota_ids:
        facts.quotas = read_defs(backend, list(quota_ids))
    return facts


def _block(backend: Backend, items: Sequence[tuple[ExecutionId, str, str, str, Attachments]], now: int) -> int:
    """Block (eid, lane, reason, detail, attachments) items; index them under their blocker. Returns blocked."""
    if not items:
        return 0
    replies = backend.call_many([F.block_execution_for_admission(ExecKeys(e), lane=lane, reason=reason,
                                                                 detail=detail, now_ms=now)
                                 for e, lane, reason, detail, _ in items])
    pipe = backend.client.pipeline(transaction=False)
    n = 0
    for (eid, _, reason, detail, _a), r in zip(items, replies, strict=True):
        if isinstance(r, ScriptError):
            log.info("could not block %s (%s): %s", eid, reason, r)
            continue
        n += 1
        ref = _DETAIL_REF.match(detail)
        if ref and ref.group(1) == "budget":
            pipe.zadd(keys.budget_blocked(budget_keys(backend, ref.group(2))), {eid: now})
        elif ref:
            pipe.zadd(keys.quota_blocked(quota_keys(backend, ref.group(2))), {eid: now})
    if n:
        pipe.execute()
    return n


# ------------------------------------------------------------------ the gate (claim path)
@dataclass
class Screened:
    """Which candidates may get a grant, and which quota admissions this batch made itself."""

    passed: list[int]
    #: eid -> quota id admitted by this batch (`ADMITTED`, not `ALREADY_ADMITTED`): ours to release.
    ours: dict[str, str] = field(default_factory=dict)
    blocked: int = 0


def screen(backend: Backend, cands: Sequence[tuple[ExecutionId, str, Mapping[str, str], Mapping[str, Any]]],
           worker_caps: set[str]) -> Screened:
    """Admission for a claim batch of (eid, lane, core fields, policy). Candidates without attachments
    pass without any round trip; attached ones cost one read round and one admission round (plus one
    to block the refused). Capability mismatches pass un-admitted: their grant fails and blocks them
    on route, so no quota slot is taken for an execution this worker cannot run."""
    att = [attachments(pre, pol) for _, _, pre, pol in cands]
    gated = [i for i, (a, (_, _, pre, _)) in enumerate(zip(att, cands, strict=True))
             if a and set(filter(None, pre.get("required_capabilities", "").split(","))) <= worker_caps]
    out = Screened([i for i in range(len(cands)) if i not in set(gated)])
    if not gated:
        return out
    facts = _read_facts(backend, list(dict.fromkeys(b for i in gated for b in att[i].budget_ids)),
                        list(dict.fromkeys(att[i].quota_id for i in gated if att[i].quota_id)))
    blocks: list[tuple[ExecutionId, str, str, str, Attachments]] = []
    admit: list[int] = []
    for i in gated:
        eid, lane, _, _ = cands[i]
        detail = facts.breach(att[i].budget_ids)
        if detail:
            blocks.append((eid, lane, "waiting_for_budget", detail, att[i]))
            metrics.inc(metrics.BUDGET_HIT, detail.split(": ", 1)[-1].split(" at its hard limit")[0])
        elif att[i].quota_id in facts.quotas:
            admit.append(i)
        else:  # no quota, or an unknown one (fail-open: a typo must not strand work forever)
            out.passed.append(i)
    calls = []
    for i in admit:
        d = facts.quotas[att[i].quota_id]
        calls.append(F.check_admission_and_record(quota_keys(backend, d.quota_id), cands[i][0], now_ms=facts.now_ms,
                                                  window_seconds=d.window_seconds, rate_limit=d.max_requests,
                                                  concurrency_cap=d.cap, jitter_ms=d.jitter_ms))
    for i, r in zip(admit, backend.call_many(calls), strict=True):
        eid, lane, _, _ = cands[i]
        qid = att[i].quota_id
        if isinstance(r, ScriptError):
            blocks.append((eid, lane, "waiting_for_quota", f"quota {qid}: admission failed ({r.code})", att[i]))
        elif r.status in ("ADMITTED", "ALREADY_ADMITTED"):
            out.passed.append(i)
            if r.status == "ADMITTED":
                out.ours[eid] = qid
        elif r.status == "RATE_EXCEEDED":
            metrics.inc(metrics.QUOTA_HIT, "rate")
            d = facts.quotas[qid]
            retry = r.fields[0] if r.fields else "?"
            detail = f"quota {qid}: rate limit of {d.max_requests} per {d.window_seconds}s reached; retry in {retry} ms"
            blocks.append((eid, lane, "waiting_for_quota", detail, att[i]))
        else:
            metrics.inc(metrics.QUOTA_HIT, "concurrency")
            blocks.append((eid, lane, "waiting_for_quota",
                           f"quota {qid}: concurrency cap of {facts.quotas[qid].cap} reached", att[i]))
    out.blocked = _block(backend, blocks, facts.now_ms)
    out.passed.sort()
    touched = {att[i].quota_id for i in admit}
    if touched:
        events.publish(backend, topics=["quotas", *touched])  # quota gauges re-render (buffered)
    return out


def release_unclaimed(backend: Backend, ours: Mapping[str, str],
                      outcomes: Iterable[tuple[str, Any, Any]]) -> None:
    """After the grant+claim round: give back admissions of this batch whose claim did not happen.

    `outcomes` are (eid, grant reply, claim reply). A refused claim may mean another claimer has the
    execution, so the admission is released only if, re-read under WATCH, nobody holds it: not active
    and no claim grant outstanding.
    """
    for eid, _grant, claim in outcomes:
        qid = ours.get(eid)
        if qid and isinstance(claim, ScriptError):
            release(backend, qid, eid, only_if=_unheld)


def _unheld(core: Mapping[str, str], grant: bool) -> bool:
    return core.get("lifecycle_phase") != "active" and not grant


def idle(core: Mapping[str, str], grant: bool) -> bool:
    """Not running and not about to run on its admission: finished, suspended, gone, or runnable but
    not eligible (blocked, delayed) with no claim grant outstanding."""
    phase = core.get("lifecycle_phase", "")
    if phase in ("", "terminal", "suspended"):
        return True
    return phase == "runnable" and core.get("eligibility_state") != "eligible_now" and not grant


# ------------------------------------------------------------------ release
Guard = Callable[[Mapping[str, str], bool], bool]
_GUARD_FIELDS = ("lifecycle_phase", "eligibility_state")


def release(backend: Backend, quota_id: str, eid: str, *, only_if: Guard | None = None, attempts: int = 8) -> bool:
    """Release `eid`'s admission if it still holds one (idempotent); True when this call released it.

    `only_if(core, grant_exists)` re-checks the execution inside the same WATCH; on a standalone server the
    execution's core and grant are watched too, so a claim landing in between aborts the release."""
    q = quota_keys(backend, quota_id)
    call = F.release_admission(q, eid)
    k = ExecKeys(eid)
    watched = [q.admitted_set] if only_if is None or backend.is_cluster else [q.admitted_set, k.core, k.claim_grant]
    with backend.client.pipeline(transaction=True) as pipe:
        # A cluster transaction only takes commands of its watched slot (the quota's): the execution's
        # fields are read beside it, unwatched.
        guard = backend.client if backend.is_cluster else pipe
        for _ in range(attempts):
            try:
                pipe.watch(*watched)
                if not pipe.sismember(q.admitted_set, eid):
                    pipe.unwatch()
                    return False
                if only_if is not None:
                    core = dict(zip(_GUARD_FIELDS, map(text, guard.hmget(k.core, _GUARD_FIELDS)), strict=True))
                    if not only_if(core, bool(guard.exists(k.claim_grant))):
                        pipe.unwatch()
                        return False
                pipe.multi()
                pipe.fcall(call.function, len(call.keys), *call.keys, *call.args)
                pipe.execute()
                events.publish(backend, topics=["quotas", quota_id])
                return True
            except redis.WatchError:
                continue
    log.warning("release of %s on quota %s kept conflicting; the quota reconciler will finish it", eid, quota_id)
    return False


def trim_drift(backend: Backend, quota_id: str) -> int:
    """Bring an over-counted concurrency counter back to the admitted set's size; returns the correction.

    Only ever lowers the counter to the number of admitted executions, under WATCH of both keys."""
    q = quota_keys(backend, quota_id)
    sentinel = F.release_admission(q, "reconcile")  # names no admission: it only decrements
    with backend.client.pipeline(transaction=True) as pipe:
        for _ in range(8):
            try:
                pipe.watch(q.admitted_set, q.concurrency)
                count = int(text(pipe.get(q.concurrency)) or 0)
                size = int(pipe.scard(q.admitted_set))
                if count <= size:
                    pipe.unwatch()
                    if count < size:
                        log.warning("quota %s counts %d in flight but %d are admitted", quota_id, count, size)
                    return 0
                pipe.multi()
                for _ in range(count - size):
                    pipe.fcall(sentinel.function, len(sentinel.keys), *sentinel.keys, *sentinel.args)
                pipe.execute()
                return count - size
            except redis.WatchError:
                continue
    return 0


# ------------------------------------------------------------------ unblock
def _worker_caps(backend: Backend) -> set[str] | None:
    """Union of live workers' capabilities (None when unreadable: route checks then fail open)."""
    try:
        ids = [text(w) for w in backend.client.smembers(keys.WORKERS_INDEX)]
        pipe = backend.client.pipeline(transaction=False)
        for w in ids:
            pipe.get(keys.worker_caps(w))
        return {c for v in (pipe.execute() if ids else []) for c in text(v).split(",") if c}
    except redis.RedisError:
        return None


_UNBLOCK_FIELDS = ("lifecycle_phase", "eligibility_state", "blocking_reason", "lane_id", "priority", "created_at",
                   *CORE_FIELDS)


def unblock(backend: Backend, eids: Sequence[str], *, limit_per_quota: bool = True) -> int:
    """Re-check blocked executions and unblock those whose blocker cleared; returns how many.

    Budget: no attached budget at a hard limit. Quota: room under the rate limit and the cap — and
    only as many per policy as there is room, oldest first, so a freed slot does not wake a herd.
    Route: some live worker (union of capabilities) can run it. Stale reverse-index entries are pruned.
    """
    eids = list(dict.fromkeys(eids))
    if not eids:
        return 0
    pipe = backend.client.pipeline(transaction=False)
    for e in eids:
        k = ExecKeys(e)
        pipe.hmget(k.core, _UNBLOCK_FIELDS)
        pipe.get(k.policy)
    raw = pipe.execute()
    rows = []
    for i, e in enumerate(eids):
        core = dict(zip(_UNBLOCK_FIELDS, map(text, raw[2 * i]), strict=True))
        rows.append((ExecutionId(e), core, attachments(core, parse_stored_policy(text(raw[2 * i + 1])))))
    blocked = [r for r in rows if r[1]["lifecycle_phase"] == "runnable" and r[1]["blocking_reason"] in BLOCKED_INDEX]
    _prune(backend, [r for r in rows if r not in blocked])
    if not blocked:
        return 0
    facts = _read_facts(backend, list(dict.fromkeys(b for r in blocked for b in r[2].budget_ids)),
                        list(dict.fromkeys(r[2].quota_id for r in blocked if r[2].quota_id)))
    room = _quota_room(backend, facts) if facts.quotas else {}
    caps: set[str] | None = None
    go = []
    for eid, core, a in blocked:
        reason = core["blocking_reason"]
        if reason == "waiting_for_budget":
            ok = facts.breach(a.budget_ids) is None
        elif reason == "waiting_for_quota":
            left = room.get(a.quota_id, 1)
            ok = left > 0 and facts.breach(a.budget_ids) is None
            if ok and limit_per_quota and a.quota_id in room:
                room[a.quota_id] = left - 1
        else:
            if caps is None:
                caps = _worker_caps(backend)
            need = set(filter(None, core["required_capabilities"].split(",")))
            ok = caps is None or need <= caps
        if ok:
            go.append((eid, core, a))
    replies = backend.call_many([
        F.unblock_execution(ExecKeys(e), lane=core["lane_id"] or "default",
                            blocked_index=BLOCKED_INDEX[core["blocking_reason"]],
                            expected_reason=core["blocking_reason"], now_ms=facts.now_ms) for e, core, _ in go])
    done = [r for r, rep in zip(go, replies, strict=True) if not isinstance(rep, ScriptError)]
    _prune(backend, done)
    # Released from a route block: index it for the workers that can run it (see ffcore.routing).
    capable = routing.IndexBatch()
    for eid, core, _ in done:
        if core["blocking_reason"] == "waiting_for_capable_worker":
            capable.add(eid.partition_index, core["lane_id"] or "default", core["required_capabilities"], str(eid),
                        routing.eligible_score(int(core["priority"] or 0), int(core["created_at"] or 0)))
    if capable.entries:
        pipe = backend.client.pipeline(transaction=False)
        capable.queue(pipe)
        pipe.execute()
    return len(done)


def _quota_room(backend: Backend, facts: _Facts) -> dict[str, int]:
    """Admissions each policy could take now: min(rate room, cap room); large when unlimited."""
    pipe = backend.client.pipeline(transaction=False)
    ds = list(facts.quotas.values())
    for d in ds:
        q = quota_keys(backend, d.quota_id)
        pipe.zcount(q.window(), f"({facts.now_ms - d.window_ms}", "+inf")
        pipe.get(q.concurrency)
    raw = pipe.execute()
    out = {}
    for i, d in enumerate(ds):
        rate = d.max_requests - int(raw[2 * i]) if d.max_requests else 1 << 30
        cap = d.cap - int(text(raw[2 * i + 1]) or 0) if d.cap else 1 << 30
        out[d.quota_id] = min(rate, cap)
    return out


def _prune(backend: Backend, rows: Sequence[tuple[ExecutionId, dict[str, str], Attachments]]) -> None:
    """Drop executions from the blocked reverse indexes of their budgets and quota."""
    pipe = backend.client.pipeline(transaction=False)
    n = 0
    for eid, _, a in rows:
        for b in a.budget_ids:
            pipe.zrem(keys.budget_blocked(budget_keys(backend, b)), eid)
            n += 1
        if a.quota_id:
            pipe.zrem(keys.quota_blocked(quota_keys(backend, a.quota_id)), eid)
            n += 1
    if n:
        pipe.execute()
