"""Server-side scheduling for remote workers: find the next eligible execution and issue a claim grant.

The worker then claims with ff_claim_execution (or the resumed path) using the grant
(`ffcore.worker.grant_claim.claim_from_grant`). Partitions are visited once, starting at a per-worker
offset so different workers spread over partitions.

Admission (operations §4.4, server.md #23): every candidate goes through the same gate as a worker's own
claim path, `ffcore.budgets.admission.screen` — capabilities, then budgets (a dimension at its hard limit
blocks it on `blocked:budget`), then quota admission (rate window and concurrency cap; refused ones wait
on `blocked:quota`). Candidates are screened one at a time, in probe order, so a call takes at most one
quota slot: the one of the execution it grants. A slot admitted here whose grant is then refused is given
back at once; a granted one is released when the attempt ends (the task carries its quota id), or by the
quota reconciler once the execution is idle.

Reclaim grants (upstream v0.13, RFC-024) hand one lease-expired or lease-revoked execution to a named worker:
`issue_reclaim_grant` answers `ReclaimGranted`, `NotReclaimable` (not `lease_expired_reclaimable` /
`lease_revoked`, or a grant is already out) or `ReclaimCapExceeded` (its `max_reclaim_count` is used up: checked
before a grant is issued, so none is — the next reclaim attempt fails it terminally, as `ff_reclaim_execution`
does). The worker consumes it with `ffcore.worker.grant_claim.claim_from_reclaim_grant`.
"""

from __future__ import annotations

import contextlib
import zlib
from dataclasses import dataclass

from ffcore import events, keys
from ffcore import functions as F
from ffcore.backend import Backend
from ffcore.budgets import admission
from ffcore.budgets.quotas import quota_keys
from ffcore.errors import ScriptError
from ffcore.ids import ExecutionId, new_uuid
from ffcore.keys import ExecKeys, PartitionKeys
from ffcore.policy import parse_stored_policy
from ffcore.reads import text

_SKIP = frozenset({"grant_already_exists", "execution_not_in_eligible_set", "execution_not_eligible",
                   "execution_not_found"})
#: Eligible heads looked at per partition: past a few blocked or already-granted ones (every solo
#: execution of a lane may share one partition), without reading a long queue.
PER_PARTITION = 8
#: Core fields the gate reads for each candidate.
_GATE_FIELDS = ("lane_id", *admission.CORE_FIELDS)


@dataclass(frozen=True)
class Grant:
    execution_id: str
    partition_index: int
    grant_key: str
    expires_at_ms: int

    @property
    def partition_key(self) -> str:
        """v0.13's opaque partition handle: the execution's hash tag (`{fp:N}`), passed back as is."""
        return PartitionKeys(self.partition_index).tag

    def as_json(self) -> dict[str, object]:
        # Both forms: v0.2.0's family/index pair and v0.13's opaque partition_key.
        return {"execution_id": self.execution_id, "partition_family": "execution",
                "partition_index": self.partition_index, "partition_key": self.partition_key,
                "grant_key": self.grant_key, "expires_at_ms": self.expires_at_ms}


def claim_for_worker(backend: Backend, *, lane: str, worker_id: str, worker_instance_id: str,
                     capabilities_csv: str, grant_ttl_ms: int, window: int = 32) -> Grant | None:
    """Grant the first eligible execution (queue order; the first PER_PARTITION of each partition) that
    passes admission; None when there is no work (or all of it is blocked by capabilities, budgets or quotas)."""
    p = backend.settings.partitions.flow
    start = zlib.crc32(worker_instance_id.encode()) % p
    caps = set(filter(None, capabilities_csv.split(",")))
    for base in range(0, p, window):
        parts = [(start + base + i) % p for i in range(min(window, p - base))]
        pipe = backend.client.pipeline(transaction=False)
        for n in parts:
            pipe.zrange(PartitionKeys(n).lane(lane).eligible, 0, PER_PARTITION - 1)
        for heads in pipe.execute():
            if not heads:
                continue
            g = _grant_first(backend, [text(h) for h in heads], lane=lane, worker_id=worker_id,
                             worker_instance_id=worker_instance_id, capabilities_csv=capabilities_csv,
                             caps=caps, grant_ttl_ms=grant_ttl_ms)
            if g is not None:
                return g
    return None


def _grant_first(backend: Backend, heads: list[str], *, lane: str, worker_id: str, worker_instance_id: str,
                 capabilities_csv: str, caps: set[str], grant_ttl_ms: int) -> Grant | None:
    """Screen one partition's heads in queue order and grant the first that passes."""
    for eid, pre, policy, granted in _preread(backend, heads):
        if granted:
            continue  # another worker holds a grant for it: neither ours nor to be blocked
        gate = admission.screen(backend, [(eid, lane, pre, policy)], caps)
        if not gate.passed:
            continue  # blocked on budget or quota by the gate
        k = ExecKeys(eid)
        try:
            backend.call(F.issue_claim_grant(k, lane=lane, worker_id=worker_id,
                                             worker_instance_id=worker_instance_id, grant_ttl_ms=grant_ttl_ms,
                                             capabilities_csv=capabilities_csv))
        except ScriptError as e:
            # Our admission, if this call made one, goes back unless someone else now holds the execution.
            admission.release_unclaimed(backend, gate.ours, [(eid, e, e)])
            if e.code == "capability_mismatch":
                # Park it on the route index so no worker hot-loops on it (unblocked by a reconciler).
                with contextlib.suppress(ScriptError):  # raced: someone else moved it
                    backend.call(F.block_execution_for_admission(
                        k, lane=lane, reason="waiting_for_capable_worker",
                        detail=f"no worker with capabilities: {e.details[0] if e.details else ''}",
                        now_ms=backend.now_ms()))
                continue
            if e.code in _SKIP:
                continue
            raise
        return Grant(eid, k.eid.partition_index, k.claim_grant, backend.now_ms() + grant_ttl_ms)
    return None


def _preread(backend: Backend, eids: list[str]) -> list[tuple[ExecutionId, dict[str, str], dict[str, object], bool]]:
    """The gate's inputs for each head: core fields (attachments, capabilities), the stored policy, and
    whether a claim grant is outstanding."""
    pipe = backend.client.pipeline(transaction=False)
    for e in eids:
        k = ExecKeys(e)
        pipe.hmget(k.core, _GATE_FIELDS)
        pipe.get(k.policy)
        pipe.exists(k.claim_grant)
    raw = pipe.execute()
    out = []
    for i, e in enumerate(eids):
        pre = dict(zip(_GATE_FIELDS, map(text, raw[3 * i]), strict=True))
        out.append((ExecutionId(e), pre, parse_stored_policy(text(raw[3 * i + 1])), bool(raw[3 * i + 2])))
    return out


# ------------------------------------------------------------------ an operator's "take now" (operations §4.7)
#: Whom an operator's take leases the execution to (upstream's worker identity for issue_grant_and_claim).
OPERATOR = "operator"
#: Bounds of the lease an operator's take holds (ms): at least a second, at most an hour.
TAKE_LEASE_MIN_MS, TAKE_LEASE_MAX_MS = 1_000, 3_600_000


@dataclass(frozen=True)
class Taken:
    """ClaimGrantOutcome: the lease an operator's take holds."""

    lease_id: str
    lease_epoch: int
    attempt_index: int

    def as_json(self) -> dict[str, object]:
        return {"lease_id": self.lease_id, "lease_epoch": self.lease_epoch, "attempt_index": self.attempt_index}


def issue_grant_and_claim(backend: Backend, execution_id: str, *, lease_duration_ms: int,
                          lane: str | None = None) -> Taken:
    """Take `execution_id` now: grant and claim it in one atomic call (`ff_issue_grant_and_claim`), leased
    to the worker identity `operator` for `lease_duration_ms` — no capability check and no admission: an
    operator's decision. An interrupted attempt is resumed under the new lease; otherwise a new attempt
    starts. Nobody renews the lease: when it expires, the lease-expiry scanner marks it and a worker of the
    lane reclaims it (a new attempt), unless the operator ended the execution first (cancel) or revoked it.

    A quota-blocked execution (`blocked_by_quota`) is released from its block first (`ff_unblock_execution`)
    and then taken; the take bypasses the quota (it takes no slot of its window or concurrency cap, as it
    skips admission). If the take is then refused, the block is put back with its reason and detail.

    Raises ValueError for a lease outside 1 s..1 h, InvalidId for a bad id, ScriptError with the engine's
    code for an execution that is not eligible now (`execution_not_found`, `execution_not_eligible`,
    `lease_conflict`, `active_attempt_exists`, `grant_already_exists`, `execution_not_in_eligible_set`)."""
    if isinstance(lease_duration_ms, bool) or not TAKE_LEASE_MIN_MS <= lease_duration_ms <= TAKE_LEASE_MAX_MS:
        raise ValueError(f"lease_duration_ms must be within {TAKE_LEASE_MIN_MS}..{TAKE_LEASE_MAX_MS}")
    eid = ExecutionId(execution_id)
    k = ExecKeys(eid)
    pipe = backend.client.pipeline(transaction=False)
    pipe.hmget(k.core, "lane_id", "eligibility_state", "blocking_reason", "blocking_detail", "quota_policy_id")
    pipe.get(k.policy)
    (stored_lane, elig, reason, detail, core_quota), pol = pipe.execute()
    policy = parse_stored_policy(text(pol))
    tp = policy.get("timeout_policy")
    ato = tp.get("attempt_timeout_ms") if isinstance(tp, dict) else None
    lane = lane or text(stored_lane) or "default"
    quota_blocked = text(elig) == "blocked_by_quota" and text(reason) == "waiting_for_quota"
    if quota_blocked:
        # Refused (e.g. a scanner released it meanwhile: not_blocked) -> the take below decides.
        with contextlib.suppress(ScriptError):
            backend.call(F.unblock_execution(k, lane=lane, blocked_index=admission.BLOCKED_INDEX["waiting_for_quota"],
                                             expected_reason="waiting_for_quota", now_ms=backend.now_ms()))
    try:
        reply = backend.call(F.issue_grant_and_claim(
            k, lane=lane, worker_id=OPERATOR, worker_instance_id=OPERATOR,
            lease_id=new_uuid(), attempt_id=new_uuid(), lease_ttl_ms=lease_duration_ms,
            attempt_timeout_ms=ato if isinstance(ato, int) and ato > 0 else None))
    except ScriptError:
        if quota_blocked:  # put the block back: a refused take changes nothing
            with contextlib.suppress(ScriptError):
                backend.call(F.block_execution_for_admission(k, lane=lane, reason="waiting_for_quota",
                                                             detail=text(detail), now_ms=backend.now_ms()))
        raise
    if quota_blocked:
        quota = admission.attachments({"quota_policy_id": text(core_quota)}, policy).quota_id
        if quota:  # no longer waiting on the quota: out of its reverse index of blocked executions
            backend.client.zrem(keys.quota_blocked(quota_keys(backend, quota)), str(eid))
    events.publish(backend, ids=[eid])
    return Taken(reply[0], int(reply[1]), int(reply[2]))


# ------------------------------------------------------------------ reclaim grants (upstream v0.13)
#: The library's own default when neither the policy nor the caller names a cap (ff_reclaim_execution).
DEFAULT_MAX_RECLAIM_COUNT = 100
GRANT_TTL_MS = 5_000
NOT_RECLAIMABLE = frozenset({"execution_not_reclaimable", "execution_not_found", "grant_already_exists",
                              "capability_mismatch"})
GRANT_GONE = frozenset({"invalid_claim_grant", "claim_grant_expired"})


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


def reclaim_cap(backend: Backend, k: ExecKeys, default: int | None) -> tuple[int, int, str]:
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
    count, cap, lane = reclaim_cap(backend, k, max_reclaim_count)
    if count >= cap:
        return ReclaimCapExceeded(str(eid), count)
    try:
        reply = backend.call(F.issue_reclaim_grant(k, lane=lane, worker_id=worker_id,
                                                   worker_instance_id=worker_instance_id, grant_ttl_ms=grant_ttl_ms,
                                                   capabilities_csv=capabilities_csv))
    except ScriptError as e:
        if e.code in NOT_RECLAIMABLE:
            return NotReclaimable(str(eid), " ".join([e.code, *e.details]).strip())
        raise
    del reply  # OK(execution_id): the expiry is the grant's own field
    expires = int(text(backend.client.hget(k.claim_grant, "grant_expires_at")) or 0)
    return ReclaimGranted(ReclaimGrant(str(eid), lane, k.claim_grant, expires))
