"""Reclaim grants (upstream v0.13, RFC-024): hand one lease-expired or lease-revoked execution to a named
worker, which then takes it over with a new attempt.

    out = issue_reclaim_grant(backend, eid, worker_id="w1", worker_instance_id="w1-a")
    if isinstance(out, ReclaimGranted):
        res = claim_from_reclaim_grant(worker, out.grant)   # Claimed(task) | NotReclaimable | ...

`issue_reclaim_grant` answers `ReclaimGranted`, `NotReclaimable` (not `lease_expired_reclaimable` /
`lease_revoked`, or a grant is already out) or `ReclaimCapExceeded` (the execution has used its
`max_reclaim_count`; checked before a grant is issued, so none is — the execution is failed terminally by
the next reclaim attempt, as `ff_reclaim_execution` does). `claim_from_reclaim_grant` answers `Claimed`,
`NotReclaimable`, `ReclaimCapExceeded` (the engine has just failed the execution: `max_reclaims_exceeded`)
or `GrantNotFound` (consumed, expired or issued to another worker).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ffcore import events
from ffcore import functions as F
from ffcore.backend import Backend
from ffcore.errors import ScriptError
from ffcore.ids import ExecutionId
from ffcore.keys import ExecKeys
from ffcore.policy import parse_stored_policy
from ffcore.reads import text
from ffcore.worker.task import ClaimedTask

if TYPE_CHECKING:
    from ffcore.worker.worker import Worker

#: The library's own default when neither the policy nor the caller names a cap (ff_reclaim_execution).
DEFAULT_MAX_RECLAIM_COUNT = 100
GRANT_TTL_MS = 5_000
_NOT_RECLAIMABLE = frozenset({"execution_not_reclaimable", "execution_not_found", "grant_already_exists",
                              "capability_mismatch"})
_GRANT_GONE = frozenset({"invalid_claim_grant", "claim_grant_expired"})


@dataclass(frozen=True)
class ReclaimGrant:
    execution_id: str
    lane_id: str
    grant_key: str
    expires_at_ms: int

    @property
    def partition_key(self) -> str:
        """The opaque partition handle (the execution's hash tag), as the v0.13 claim grant carries it."""
        return ExecKeys(ExecutionId(self.execution_id)).tag

    def as_json(self) -> dict[str, object]:
        return {"execution_id": self.execution_id, "lane_id": self.lane_id, "partition_key": self.partition_key,
                "grant_key": self.grant_key, "expires_at_ms": self.expires_at_ms}


@dataclass(frozen=True)
class ReclaimGranted:
    grant: ReclaimGrant
    outcome: str = "granted"


@dataclass(frozen=True)
class NotReclaimable:
    execution_id: str
    detail: str
    outcome: str = "not_reclaimable"


@dataclass(frozen=True)
class ReclaimCapExceeded:
    execution_id: str
    reclaim_count: int
    outcome: str = "reclaim_cap_exceeded"


@dataclass(frozen=True)
class GrantNotFound:
    execution_id: str
    outcome: str = "grant_not_found"


@dataclass(frozen=True)
class Claimed:
    task: ClaimedTask
    outcome: str = "claimed"


def _cap(backend: Backend, k: ExecKeys, default: int | None) -> tuple[int, int, str]:
    """(reclaims so far, cap, lane) — the cap as ff_reclaim_execution computes it (policy first)."""
    pipe = backend.client.pipeline(transaction=False)
    pipe.hmget(k.core, "lease_reclaim_count", "lane_id")
    pipe.get(k.policy)
    (count, lane), pol = pipe.execute()
    stored = parse_stored_policy(text(pol)).get("max_reclaim_count")
    cap = stored if isinstance(stored, int) and not isinstance(stored, bool) else default
    return int(text(count) or 0), DEFAULT_MAX_RECLAIM_COUNT if cap is None else cap, text(lane) or "default"


def issue_reclaim_grant(backend: Backend, execution_id: str, *, worker_id: str, worker_instance_id: str,
                        capabilities_csv: str = "", grant_ttl_ms: int = GRANT_TTL_MS,
                        max_reclaim_count: int | None = None,
                        ) -> ReclaimGranted | NotReclaimable | ReclaimCapExceeded:
    """Issue a reclaim grant on `execution_id` to `worker_id` (`ff_issue_reclaim_grant`); see the module."""
    eid = ExecutionId(execution_id)
    k = ExecKeys(eid)
    count, cap, lane = _cap(backend, k, max_reclaim_count)
    if count >= cap:
        return ReclaimCapExceeded(str(eid), count)
    try:
        reply = backend.call(F.issue_reclaim_grant(k, lane=lane, worker_id=worker_id,
                                                   worker_instance_id=worker_instance_id, grant_ttl_ms=grant_ttl_ms,
                                                   capabilities_csv=capabilities_csv))
    except ScriptError as e:
        if e.code in _NOT_RECLAIMABLE:
            return NotReclaimable(str(eid), " ".join([e.code, *e.details]).strip())
        raise
    del reply  # OK(execution_id): the expiry is the grant's own field
    expires = int(text(backend.client.hget(k.claim_grant, "grant_expires_at")) or 0)
    return ReclaimGranted(ReclaimGrant(str(eid), lane, k.claim_grant, expires))


def claim_from_reclaim_grant(worker: Worker, grant: ReclaimGrant, *, max_reclaim_count: int | None = None,
                             ) -> Claimed | NotReclaimable | ReclaimCapExceeded | GrantNotFound:
    """Consume `grant` (issued to this worker's worker_id) with `ff_reclaim_execution`: a new attempt under a
    new lease, tracked and renewed by `worker` like any claimed task; see the module for the outcomes."""
    eid = grant.execution_id
    try:
        task = worker.claimer.reclaim_granted(eid, grant.lane_id, default_max_reclaim_count=max_reclaim_count)
    except ScriptError as e:
        if e.code == "max_retries_exhausted":
            count, _cap_now, _lane = _cap(worker.backend, ExecKeys(ExecutionId(eid)), max_reclaim_count)
            events.publish(worker.backend, ids=[eid])  # failed terminally just now
            return ReclaimCapExceeded(eid, count)
        if e.code in _GRANT_GONE:
            return GrantNotFound(eid)
        if e.code in _NOT_RECLAIMABLE:
            return NotReclaimable(eid, e.code)
        raise
    worker._track(task)
    events.publish(worker.backend, ids=[eid])
    return Claimed(task)
