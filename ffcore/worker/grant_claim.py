"""The production claim path of the worker SDK (worker-sdk §2.5): a worker that consumes claim grants the
scheduler issued instead of scheduling itself.

    grant = claim_via_server(worker, "default")          # asks the scheduler; None = no work
    task = claim_from_grant(worker, "default", grant)   # consumes a grant already in hand

The scheduler (`ffcore.worker.grants.claim_for_worker`, behind `POST /v1/workers/{id}/claim`) runs the
admission gate — capabilities, budgets, quotas — before it grants, so a worker claiming this way never
runs what admission refused and needs no admission or probing of its own. Where the scheduler runs is
the worker's `WorkerConfig.scheduler`:

- `""` (default): no grants; the worker schedules itself (`ffcore.worker.claiming`).
- `"valkey"`: the scheduler's code runs in the worker process, against the same Valkey — the same
  admission as the server route, without the HTTP hop.
- `"http://host:port"` / `"https://…"`: the server's REST route, with the bearer token from
  `FF_API_TOKEN` (or `WorkerConfig`-independent `ServerScheduler(url, token)` built by hand).

`claim_from_grant` takes a free slot first (`WorkerAtCapacity` when there is none; the grant is left for
its TTL), then `ff_claim_execution` — or `ff_claim_resumed_execution` for an interrupted attempt — consumes
the grant. The task is tracked and renewed like any other and gives its quota admission back when its
attempt ends.

`claim_from_reclaim_grant` consumes a reclaim grant (`ffcore.worker.grants.issue_reclaim_grant`): a new attempt
under a new lease, in one of the worker's slots; it answers `Claimed`, `NotReclaimable`, `ReclaimCapExceeded` (the
engine has just failed the execution: `max_reclaims_exceeded`) or `GrantNotFound` (consumed, expired or issued
to another worker).

`claim_contract` is the same contract path for a self-scheduling worker: what its fast-path claim handed back
(admission attachments, capability mismatches) gets its grant and claim here, after the worker's own admission.
"""

from __future__ import annotations

import json
import logging
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ffcore import events, metrics
from ffcore import functions as F
from ffcore.backend import Backend
from ffcore.budgets import admission
from ffcore.errors import ConfigError, FFError, InvalidId, ScriptError
from ffcore.ids import ExecutionId, new_uuid
from ffcore.keys import ExecKeys
from ffcore.policy import parse_stored_policy
from ffcore.reads import decode_map, text
from ffcore.worker.grants import (
    GRANT_GONE,
    NOT_RECLAIMABLE,
    Grant,
    GrantNotFound,
    NotReclaimable,
    ReclaimCapExceeded,
    ReclaimGrant,
    claim_for_worker,
    reclaim_cap,
)
from ffcore.worker.task import ClaimedTask

if TYPE_CHECKING:
    from ffcore.worker.claiming import Candidate, Claimer
    from ffcore.worker.worker import Worker

log = logging.getLogger("ffcore.worker.grant_claim")

#: Grant TTL a worker asks for (the seed SDK's constant; the server accepts 1..60 000 ms).
GRANT_TTL_MS = 5_000
#: Seconds an HTTP claim request may take before it counts as failed.
HTTP_TIMEOUT_S = 10.0
_PRE_FIELDS = ("total_attempt_count", "current_attempt_index", "attempt_state", "execution_kind",
               *admission.CORE_FIELDS)
#: Reply codes that just mean "someone else got there first / not claimable now": try the next one.
SKIP = frozenset({"grant_already_exists", "execution_not_in_eligible_set", "execution_not_eligible",
                   "execution_not_leaseable", "lease_conflict", "invalid_claim_grant", "claim_grant_expired",
                   "use_claim_resumed_execution", "not_a_resumed_execution", "execution_not_reclaimable",
                   "execution_not_found", "active_attempt_exists", "raised"})
#: Claim refusals that only mean the grant went stale (raced, expired, consumed): skip it.
_STALE = frozenset({"invalid_claim_grant", "claim_grant_expired", "execution_not_leaseable", "lease_conflict",
                    "execution_not_found", "not_a_resumed_execution", "active_attempt_exists"})


class WorkerAtCapacity(FFError):
    """claim_from_grant found no free slot; the grant is untouched (it expires after its TTL). Retryable."""


class SchedulerError(FFError):
    """The scheduler could not be asked, or answered something other than a grant or "no work"."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class GrantSource(Protocol):
    """Where grants come from: the next grant for this worker on `lane`, or None when there is no work."""

    def grant(self, *, lane: str, worker_id: str, worker_instance_id: str, capabilities_csv: str,
              grant_ttl_ms: int) -> Grant | None: ...


class LocalScheduler:
    """The scheduler's own code (`claim_for_worker`) run in this process over the shared Valkey."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def grant(self, *, lane: str, worker_id: str, worker_instance_id: str, capabilities_csv: str,
              grant_ttl_ms: int) -> Grant | None:
        return claim_for_worker(self.backend, lane=lane, worker_id=worker_id, worker_instance_id=worker_instance_id,
                                capabilities_csv=capabilities_csv, grant_ttl_ms=grant_ttl_ms)


class ServerScheduler:
    """The server's `POST {url}/v1/workers/{worker_id}/claim` (server.md #23): 200 a grant, 204 no work."""

    def __init__(self, url: str, token: str = "", timeout_s: float = HTTP_TIMEOUT_S) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigError(f"scheduler URL {url!r} must be http(s)://host[:port][/prefix]")
        self.url = url.rstrip("/")
        self.token = token
        self.timeout_s = timeout_s

    def grant(self, *, lane: str, worker_id: str, worker_instance_id: str, capabilities_csv: str,
              grant_ttl_ms: int) -> Grant | None:
        body = json.dumps({"lane_id": lane, "worker_instance_id": worker_instance_id,
                           "capabilities": [c for c in capabilities_csv.split(",") if c],
                           "grant_ttl_ms": grant_ttl_ms}).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        req = urllib.request.Request(f"{self.url}/v1/workers/{urllib.parse.quote(worker_id, safe='')}/claim",
                                     data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:  # noqa: S310 - http(s) checked above
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as e:
            detail = e.read()[:500].decode("utf-8", "replace")
            raise SchedulerError(f"scheduler answered {e.code}: {detail}", e.code) from e
        except (urllib.error.URLError, OSError) as e:
            raise SchedulerError(f"scheduler unreachable at {self.url}: {e}") from e
        if status == 204:
            return None
        return grant_from_json(json.loads(raw or b"null"))


def grant_from_json(doc: Any) -> Grant:
    """A Grant from the claim route's reply; a malformed one is a SchedulerError (not retryable)."""
    try:
        eid = ExecutionId(str(doc["execution_id"]))
        grant = Grant(str(eid), eid.partition_index, str(doc["grant_key"]), int(doc["expires_at_ms"]))
    except (KeyError, TypeError, ValueError, InvalidId) as e:
        raise SchedulerError(f"malformed grant from the scheduler: {str(doc)[:200]}") from e
    # Either form names the partition (v0.13's opaque partition_key, v0.2.0's partition_index); one that
    # disagrees with the execution's own is a producer bug, not something to claim on.
    key, index = doc.get("partition_key"), doc.get("partition_index")
    if (key is not None and key != grant.partition_key) or (index is not None and index != grant.partition_index):
        raise SchedulerError(f"grant's partition disagrees with its execution: {str(doc)[:200]}")
    return grant


def source_for(backend: Backend, scheduler: str) -> GrantSource | None:
    """The grant source `WorkerConfig.scheduler` names (None: the worker schedules itself)."""
    if not scheduler:
        return None
    if scheduler == "valkey":
        return LocalScheduler(backend)
    if scheduler.startswith(("http://", "https://")):
        return ServerScheduler(scheduler, os.environ.get("FF_API_TOKEN", ""))
    raise ConfigError(f"WorkerConfig.scheduler {scheduler!r}: use '' (self-scheduling), 'valkey' or an http(s) URL")


# ------------------------------------------------------------------ the worker SDK calls
def claim_via_server(worker: Worker, lane: str, grant_ttl_ms: int = GRANT_TTL_MS,
                     source: GrantSource | None = None) -> ClaimedTask | None:
    """Ask the scheduler for a grant on `lane` and claim it: a task, or None when there is no work.

    `source` defaults to the worker's configured one (`WorkerConfig.scheduler`; the server over HTTP or
    the in-process scheduler). Raises WorkerAtCapacity (before asking) when the worker has no free slot."""
    src = source or worker.grants
    if src is None:
        raise ConfigError("claim_via_server needs a scheduler: set WorkerConfig.scheduler or pass source=")
    if lane not in worker.config.lanes:
        raise ConfigError(f"lane {lane!r} is not one of this worker's lanes {list(worker.config.lanes)}")
    if worker.slots.free() <= 0:
        metrics.inc(metrics.WORKER_AT_CAPACITY)
        raise WorkerAtCapacity(f"worker {worker.config.worker_instance_id} has no free slot")
    cfg = worker.config
    grant = src.grant(lane=lane, worker_id=cfg.worker_id, worker_instance_id=cfg.worker_instance_id,
                      capabilities_csv=worker.caps_csv, grant_ttl_ms=grant_ttl_ms)
    if grant is None:
        return None
    return claim_from_grant(worker, lane, grant)


def claim_from_grant(worker: Worker, lane: str, grant: Grant) -> ClaimedTask:
    """Consume `grant` (issued to this worker's worker_id for `lane`) and return the running task.

    The caller must pass the lane the grant was issued for. Raises WorkerAtCapacity with no free slot
    (the grant is left alone), ScriptError for a grant the engine refuses (`invalid_claim_grant`,
    `claim_grant_expired`, `execution_not_leaseable`, `lease_conflict`, ...)."""
    if worker.slots.free() <= 0:
        metrics.inc(metrics.WORKER_AT_CAPACITY)
        raise WorkerAtCapacity(f"worker {worker.config.worker_instance_id} has no free slot")
    started = time.monotonic()
    task = _consume(worker, lane, grant)
    metrics.observe(metrics.CLAIM_SECONDS, time.monotonic() - started, lane)
    worker.slots.take(task)
    events.publish(worker.backend, ids=[task.execution_id])  # live pages: waiting -> active
    return task


def _consume(worker: Worker, lane: str, grant: Grant) -> ClaimedTask:
    """The claim of a grant (fresh or resumed) and the task built from it; not yet tracked."""
    backend, cfg = worker.backend, worker.config
    eid = ExecutionId(grant.execution_id)
    k = ExecKeys(eid)
    pipe = backend.client.pipeline(transaction=False)
    pipe.hmget(k.core, _PRE_FIELDS)
    pipe.get(k.policy)
    pipe.get(k.payload)
    pipe.hgetall(k.tags)
    vals, pol, payload, tags = pipe.execute()
    pre = dict(zip(_PRE_FIELDS, map(text, vals), strict=True))
    policy = parse_stored_policy(text(pol))
    lease_id = new_uuid()
    common: dict[str, Any] = {"lane": lane, "worker_id": cfg.worker_id, "worker_instance_id": cfg.worker_instance_id,
                              "lease_id": lease_id, "lease_ttl_ms": cfg.lease_ttl_ms}
    if pre["attempt_state"] == "attempt_interrupted":
        call = F.claim_resumed_execution(k, attempt_index=int(pre["current_attempt_index"] or 0), **common)
    else:
        tp = policy.get("timeout_policy")
        ato = tp.get("attempt_timeout_ms") if isinstance(tp, dict) else None
        call = F.claim_execution(k, attempt_id=new_uuid(), attempt_index_hint=int(pre["total_attempt_count"] or 0),
                                 attempt_timeout_ms=ato if isinstance(ato, int) and ato > 0 else None, **common)
    reply = backend.call(call)
    lease, epoch, expires, attempt_id, attempt_index, attempt_type = reply.fields[:6]
    task = ClaimedTask(
        backend=backend, execution_id=eid, lane=lane, kind=pre["execution_kind"], payload=bytes(payload or b""),
        tags=decode_map(tags), policy=policy, attempt_index=int(attempt_index), attempt_id=attempt_id,
        attempt_type=attempt_type, lease_id=lease, lease_epoch=int(epoch), lease_expires_at=int(expires),
        lease_ttl_ms=cfg.lease_ttl_ms, worker_instance_id=cfg.worker_instance_id, on_done=worker.slots.give_back,
    )
    # The scheduler's quota admission (if any) is this attempt's: released when it ends.
    task.quota_policy_id = admission.attachments(pre, policy).quota_id
    return task


def claim_granted(worker: Worker, n: int) -> list[ClaimedTask]:
    """The Worker's claim step with a scheduler (`WorkerConfig.scheduler`): up to `n` tasks, one grant each,
    lanes taken in turn until every lane answered "no work". Stale grants (raced, expired) are skipped.
    The caller (`Worker.claim_next`) tracks the tasks; `n` is its count of free slots."""
    src = worker.grants
    if src is None or n <= 0:
        return []
    cfg = worker.config
    tasks: list[ClaimedTask] = []
    idle: set[str] = set()
    turn = 0
    # Bounded: a stale grant keeps its execution out of the next grants, but never loop on a bad streak.
    while len(tasks) < n and len(idle) < len(cfg.lanes) and turn < 2 * n + 2 * len(cfg.lanes):
        lane = cfg.lanes[turn % len(cfg.lanes)]
        turn += 1
        if lane in idle:
            continue
        grant = src.grant(lane=lane, worker_id=cfg.worker_id, worker_instance_id=cfg.worker_instance_id,
                          capabilities_csv=worker.caps_csv, grant_ttl_ms=GRANT_TTL_MS)
        if grant is None:
            idle.add(lane)
            continue
        try:
            tasks.append(_consume(worker, lane, grant))
        except ScriptError as e:
            if e.code not in _STALE:
                raise
            log.info("grant for %s went stale: %s", grant.execution_id, e)
    if tasks:
        events.publish(worker.backend, ids=[t.execution_id for t in tasks])  # live pages: waiting -> active
    return tasks


# ------------------------------------------------------------------ the worker's own grants (contract path)
def claim_contract(claimer: Claimer, heads: list[str]) -> list[ClaimedTask]:
    """Admission, then grant + claim pairs, for candidates the fast path handed back."""
    # Never claim more than we return: a surplus claim would hold a lease nobody runs or renews.
    cands = claimer.preread(heads)
    # Budget and quota admission (server.md §2.3 #23); unattached candidates cost no round trip.
    gate = admission.screen(claimer.backend, [(c.eid, c.pre["lane_id"] or "default", c.pre, c.policy) for c in cands],
                            set(filter(None, claimer.ident.capabilities_csv.split(","))))
    cands = [cands[i] for i in gate.passed]
    calls: list[F.Call] = []
    plans: list[tuple[Candidate, str, str, str]] = []
    idn = claimer.ident
    for c in cands:
        lane = c.pre["lane_id"] or "default"
        k = ExecKeys(c.eid)
        lease_id, attempt_id = new_uuid(), new_uuid()
        calls.append(F.issue_claim_grant(k, lane=lane, worker_id=idn.worker_id,
                                         worker_instance_id=idn.worker_instance_id,
                                         grant_ttl_ms=claimer.backend.settings.grant_ttl_ms,
                                         capabilities_csv=idn.capabilities_csv))
        if c.pre["attempt_state"] == "attempt_interrupted":
            idx = int(c.pre["current_attempt_index"] or 0)
            calls.append(F.claim_resumed_execution(k, lane=lane, worker_id=idn.worker_id,
                                                   worker_instance_id=idn.worker_instance_id,
                                                   lease_id=lease_id, lease_ttl_ms=idn.lease_ttl_ms,
                                                   attempt_index=idx))
        else:
            tp = c.policy.get("timeout_policy")
            ato = tp.get("attempt_timeout_ms") if isinstance(tp, dict) else None
            calls.append(F.claim_execution(k, lane=lane, worker_id=idn.worker_id,
                                           worker_instance_id=idn.worker_instance_id, lease_id=lease_id,
                                           attempt_id=attempt_id, lease_ttl_ms=idn.lease_ttl_ms,
                                           attempt_index_hint=int(c.pre["total_attempt_count"] or 0),
                                           attempt_timeout_ms=ato if isinstance(ato, int) and ato > 0 else None))
        plans.append((c, lane, lease_id, attempt_id))
    replies = claimer.backend.call_many(calls)
    tasks: list[ClaimedTask] = []
    now = None
    for i, (c, lane, _, _) in enumerate(plans):
        grant, claim = replies[2 * i], replies[2 * i + 1]
        if not isinstance(claim, ScriptError):
            # The lease is ours whatever our grant's reply: another process with the same worker_id may
            # have issued the grant this claim consumed. Dropping it would leak the lease.
            tasks.append(claimer.task_of(c, lane, claim))
        elif isinstance(grant, ScriptError) and grant.code == "capability_mismatch":
            now = now or claimer.backend.now_ms()
            _block_route(claimer.backend, c.eid, lane, grant.details[0] if grant.details else "", now)
        elif claim.code not in SKIP:
            log.warning("claim of %s failed: %s", c.eid, claim)
    if gate.ours:
        admission.release_unclaimed(claimer.backend, gate.ours, [(p[0].eid, replies[2 * i], replies[2 * i + 1])
                                                              for i, p in enumerate(plans)])
    return tasks

def _block_route(backend: Backend, eid: ExecutionId, lane: str, missing: str, now: int) -> None:
    # Without this block every worker would hot-loop on the same queue head (worker-sdk §2.10).
    try:
        backend.call(F.block_execution_for_admission(
            ExecKeys(eid), lane=lane, reason="waiting_for_capable_worker",
            detail=f"no worker with capabilities: {missing}", now_ms=now))
    except ScriptError as e:
        log.info("could not block %s for route: %s", eid, e)


# ------------------------------------------------------------------ reclaim grants (upstream v0.13)
@dataclass(frozen=True)
class Claimed:
    task: ClaimedTask
    outcome: str = "claimed"


def claim_from_reclaim_grant(worker: Worker, grant: ReclaimGrant, *, max_reclaim_count: int | None = None,
                             ) -> Claimed | NotReclaimable | ReclaimCapExceeded | GrantNotFound:
    """Consume `grant` (issued to this worker's worker_id) with `ff_reclaim_execution`: a new attempt under a
    new lease in one of `worker`'s slots, renewed like any claimed task; see the module for the outcomes."""
    eid = grant.execution_id
    try:
        task = worker.claimer.reclaim_granted(eid, grant.lane_id, default_max_reclaim_count=max_reclaim_count)
    except ScriptError as e:
        if e.code == "max_retries_exhausted":
            count, _cap_now, _lane = reclaim_cap(worker.backend, ExecKeys(ExecutionId(eid)), max_reclaim_count)
            events.publish(worker.backend, ids=[eid])  # failed terminally just now
            return ReclaimCapExceeded(eid, count)
        if e.code in GRANT_GONE:
            return GrantNotFound(eid)
        if e.code in NOT_RECLAIMABLE:
            return NotReclaimable(eid, e.code)
        raise
    worker.slots.take(task)
    events.publish(worker.backend, ids=[eid])
    return Claimed(task)
