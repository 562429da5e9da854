"""FCALL builders of the execution lifecycle (execution.lua, lease.lua, scheduling.lua, claim-resumed,
admission blocks, replay)."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass

from ..keys import ExecKeys, LaneKeys, PartitionKeys
from .base import Arg, Call, fn, opt, parse_string


# ---------------------------------------------------------------- version
@fn("ff_version")
def version() -> Call:
    return Call("ff_version", [], [], parse_string, readonly=True)


@fn("ff_build_version")
def build_version() -> Call:
    return Call("ff_build_version", [], [], parse_string, readonly=True)


# ---------------------------------------------------------------- execution.lua
@functools.lru_cache(maxsize=4096)
def _create_index_keys(n: int, lane: str) -> tuple[str, str, str, str, str]:
    """Index keys a create passes: the same for every execution of a lane (cached; creates come in bulk)."""
    ix, lk = PartitionKeys(n), LaneKeys(n, lane)
    return lk.eligible, lk.delayed, ix.noop, ix.execution_deadline, ix.all_executions


@fn("ff_create_execution")
def create_execution(
    k: ExecKeys, *, namespace: str, lane: str, kind: str, priority: int, creator: str,
    policy_json: str = "{}", payload: bytes = b"", delay_until: int | None = None,
    idempotency_key: str | None = None, dedup_ttl_ms: int = 86_400_000, tags: dict[str, str] | None = None,
    deadline_at: int | None = None,
) -> Call:
    eligible, delayed, noop, deadline, every = _create_index_keys(k.eid.partition_index, lane)
    idem = k.idx.idempotency(namespace, idempotency_key) if idempotency_key else noop
    return Call("ff_create_execution", [
        k.core, k.payload, k.policy, k.tags, delayed if delay_until is not None else eligible,
        idem, deadline, every,
    ], [
        k.eid, namespace, lane, kind, priority, creator, policy_json, payload, opt(delay_until),
        dedup_ttl_ms if idempotency_key else "", json.dumps(tags, separators=(",", ":")) if tags else "{}",
        opt(deadline_at), k.eid.partition_index,
    ])


@fn("ff_claim_execution")
def claim_execution(
    k: ExecKeys, *, lane: str, worker_id: str, worker_instance_id: str, lease_id: str, attempt_id: str,
    lease_ttl_ms: int, attempt_index_hint: int = 0, attempt_policy_json: str = "{}",
    attempt_timeout_ms: int | None = None, execution_deadline_at: int | None = None,
) -> Call:
    lk, ix, i = k.lane(lane), k.idx, attempt_index_hint
    return Call("ff_claim_execution", [
        k.core, k.claim_grant, lk.eligible, ix.lease_expiry, ix.worker_leases(worker_instance_id),
        k.attempt(i), k.attempt_usage(i), k.attempt_policy(i), k.attempts, k.lease_current, k.lease_history,
        lk.active, ix.attempt_timeout, ix.execution_deadline,
    ], [
        k.eid, worker_id, worker_instance_id, lane, "", lease_id, lease_ttl_ms, lease_ttl_ms * 2 // 3,
        attempt_id, attempt_policy_json, opt(attempt_timeout_ms), opt(execution_deadline_at),
    ])


@dataclass(frozen=True)
class Fence:
    """What a lease holder presents: lease id, epoch, attempt id — plus where its records live."""

    lease_id: str
    lease_epoch: int
    attempt_id: str
    attempt_index: int
    worker_instance_id: str
    lane: str


@functools.lru_cache(maxsize=4096)
def _release_index_keys(n: int, lane: str, worker_instance_id: str) -> tuple[str, str, str, str, str, str]:
    """Index keys a completion passes: the same for every task of a worker's lane and partition (cached)."""
    ix, lk = PartitionKeys(n), LaneKeys(n, lane)
    return (ix.lease_expiry, ix.worker_leases(worker_instance_id), lk.terminal, lk.active, ix.attempt_timeout,
            ix.execution_deadline)


@fn("ff_complete_execution")
def complete_execution(k: ExecKeys, f: Fence, result: bytes = b"") -> Call:
    expiry, leases, terminal, active, timeout, deadline = _release_index_keys(
        k.eid.partition_index, f.lane, f.worker_instance_id)
    return Call("ff_complete_execution", [
        k.core, k.attempt(f.attempt_index), expiry, leases, terminal, k.lease_current, k.lease_history, active,
        k.stream_meta(f.attempt_index), k.result, timeout, deadline,
    ], [k.eid, f.lease_id, f.lease_epoch, f.attempt_id, result])


@fn("ff_fail_execution")
def fail_execution(k: ExecKeys, f: Fence, *, reason: str, category: str = "", retry_policy_json: str = "") -> Call:
    lk, ix = k.lane(f.lane), k.idx
    return Call("ff_fail_execution", [
        k.core, k.attempt(f.attempt_index), ix.lease_expiry, ix.worker_leases(f.worker_instance_id),
        lk.terminal, lk.delayed, k.lease_current, k.lease_history, lk.active, k.stream_meta(f.attempt_index),
        ix.attempt_timeout, ix.execution_deadline,
    ], [k.eid, f.lease_id, f.lease_epoch, f.attempt_id, reason, category, retry_policy_json])


@fn("ff_delay_execution")
def delay_execution(k: ExecKeys, f: Fence, *, delay_until: int) -> Call:
    lk, ix = k.lane(f.lane), k.idx
    return Call("ff_delay_execution", [
        k.core, k.attempt(f.attempt_index), k.lease_current, k.lease_history, ix.lease_expiry,
        ix.worker_leases(f.worker_instance_id), lk.active, lk.delayed, ix.attempt_timeout,
    ], [k.eid, f.lease_id, f.lease_epoch, f.attempt_id, delay_until])


@fn("ff_move_to_waiting_children")
def move_to_waiting_children(k: ExecKeys, f: Fence) -> Call:
    lk, ix = k.lane(f.lane), k.idx
    return Call("ff_move_to_waiting_children", [
        k.core, k.attempt(f.attempt_index), k.lease_current, k.lease_history, ix.lease_expiry,
        ix.worker_leases(f.worker_instance_id), lk.active, lk.blocked_dependencies, ix.attempt_timeout,
    ], [k.eid, f.lease_id, f.lease_epoch, f.attempt_id])


@dataclass(frozen=True)
class CoreRefs:
    """Pointers read from `E:core` that operator-side calls need to name the right KEYS."""

    lane: str
    attempt_index: int
    worker_instance_id: str
    waitpoint_id: str
    lease_id: str = ""
    lease_epoch: str = ""
    total_attempts: int = 0

    @classmethod
    def from_core(cls, core: dict[str, str]) -> CoreRefs:
        idx = core.get("current_attempt_index", "")
        total = core.get("total_attempt_count", "")
        return cls(
            lane=core.get("lane_id") or "default",
            attempt_index=int(idx) if idx.isdigit() else 0,
            worker_instance_id=core.get("current_worker_instance_id", ""),
            waitpoint_id=core.get("current_waitpoint_id", ""),
            lease_id=core.get("current_lease_id", ""),
            lease_epoch=core.get("current_lease_epoch", ""),
            total_attempts=int(total) if total.isdigit() else 0,
        )


@fn("ff_cancel_execution")
def cancel_execution(
    k: ExecKeys, r: CoreRefs, *, reason: str, source: str = "operator_override", lease_id: str = "",
    lease_epoch: str = "",
) -> Call:
    lk, ix = k.lane(r.lane), k.idx
    wp = ix.waitpoint(r.waitpoint_id) if r.waitpoint_id else ix.noop
    wpc = ix.waitpoint_condition(r.waitpoint_id) if r.waitpoint_id else ix.noop
    return Call("ff_cancel_execution", [
        k.core, k.attempt(r.attempt_index), k.stream_meta(r.attempt_index), k.lease_current, k.lease_history,
        ix.lease_expiry, ix.worker_leases(r.worker_instance_id), k.suspension_current, wp, wpc,
        ix.suspension_timeout, lk.terminal, ix.attempt_timeout, ix.execution_deadline, lk.eligible, lk.delayed,
        lk.blocked_dependencies, lk.blocked_budget, lk.blocked_quota, lk.blocked_route, lk.blocked_operator,
    ], [k.eid, reason, source, lease_id, lease_epoch])


@fn("ff_reclaim_execution")
def reclaim_execution(
    k: ExecKeys, r: CoreRefs, *, lane: str, worker_id: str, worker_instance_id: str, lease_id: str,
    attempt_id: str, lease_ttl_ms: int, next_attempt_index: int, default_max_reclaim_count: int | None = None,
) -> Call:
    """`default_max_reclaim_count` (upstream v0.13's ARGV 9) applies when the execution's policy sets none;
    None keeps v0.2.0's 8-ARGV call (the library's default, 100)."""
    lk, ix, n = k.lane(lane), k.idx, next_attempt_index
    extra: list[Arg] = [] if default_max_reclaim_count is None else [default_max_reclaim_count]
    return Call("ff_reclaim_execution", [
        k.core, k.claim_grant, k.attempt(r.attempt_index), k.stream_meta(r.attempt_index), k.attempt(n),
        k.attempt_usage(n), k.attempts, k.lease_current, k.lease_history, ix.lease_expiry,
        ix.worker_leases(worker_instance_id), lk.active, ix.attempt_timeout, ix.execution_deadline,
    ], [k.eid, worker_id, worker_instance_id, lane, lease_id, lease_ttl_ms, attempt_id, "{}", *extra])


@fn("ff_expire_execution")
def expire_execution(k: ExecKeys, r: CoreRefs, *, reason: str) -> Call:
    lk, ix = k.lane(r.lane), k.idx
    return Call("ff_expire_execution", [
        k.core, k.attempt(r.attempt_index), k.stream_meta(r.attempt_index), k.lease_current, k.lease_history,
        ix.lease_expiry, ix.worker_leases(r.worker_instance_id), lk.active, lk.terminal, ix.attempt_timeout,
        ix.execution_deadline, lk.suspended, ix.suspension_timeout, k.suspension_current,
    ], [k.eid, reason])


# ---------------------------------------------------------------- lease.lua
@fn("ff_renew_lease")
def renew_lease(k: ExecKeys, f: Fence, *, lease_ttl_ms: int, history_grace_ms: int = 5000) -> Call:
    return Call("ff_renew_lease", [k.core, k.lease_current, k.lease_history, k.idx.lease_expiry], [
        k.eid, f.attempt_index, f.attempt_id, f.lease_id, f.lease_epoch, lease_ttl_ms, history_grace_ms,
    ])


@fn("ff_mark_lease_expired_if_due")
def mark_lease_expired_if_due(k: ExecKeys) -> Call:
    return Call("ff_mark_lease_expired_if_due", [k.core, k.lease_current, k.idx.lease_expiry, k.lease_history],
                [k.eid])


@fn("ff_revoke_lease")
def revoke_lease(k: ExecKeys, r: CoreRefs, *, expected_lease_id: str = "", reason: str = "operator_revoke") -> Call:
    return Call("ff_revoke_lease", [
        k.core, k.lease_current, k.lease_history, k.idx.lease_expiry, k.idx.worker_leases(r.worker_instance_id),
    ], [k.eid, expected_lease_id, reason])


# ---------------------------------------------------------------- scheduling.lua
def _grant_args(k: ExecKeys, worker_id: str, worker_instance_id: str, lane: str, grant_ttl_ms: int,
                capabilities: str, route_snapshot_json: str, admission_summary: str) -> list[Arg]:
    return [k.eid, worker_id, worker_instance_id, lane, "", grant_ttl_ms, route_snapshot_json,
            admission_summary, capabilities]


@fn("ff_issue_claim_grant")
def issue_claim_grant(
    k: ExecKeys, *, lane: str, worker_id: str, worker_instance_id: str, grant_ttl_ms: int = 5000,
    capabilities_csv: str = "", route_snapshot_json: str = "", admission_summary: str = "",
) -> Call:
    return Call("ff_issue_claim_grant", [k.core, k.claim_grant, k.lane(lane).eligible], _grant_args(
        k, worker_id, worker_instance_id, lane, grant_ttl_ms, capabilities_csv, route_snapshot_json,
        admission_summary))


@fn("ff_issue_reclaim_grant")
def issue_reclaim_grant(
    k: ExecKeys, *, lane: str, worker_id: str, worker_instance_id: str, grant_ttl_ms: int = 5000,
    capabilities_csv: str = "", route_snapshot_json: str = "", admission_summary: str = "",
) -> Call:
    return Call("ff_issue_reclaim_grant", [k.core, k.claim_grant, k.idx.lease_expiry], _grant_args(
        k, worker_id, worker_instance_id, lane, grant_ttl_ms, capabilities_csv, route_snapshot_json,
        admission_summary))


@fn("ff_change_priority")
def change_priority(k: ExecKeys, *, lane: str, priority: int) -> Call:
    return Call("ff_change_priority", [k.core, k.lane(lane).eligible], [k.eid, priority])


@fn("ff_update_progress")
def update_progress(k: ExecKeys, f: Fence, *, pct: str = "", message: str = "") -> Call:
    return Call("ff_update_progress", [k.core], [k.eid, f.lease_id, f.lease_epoch, pct, message])


@fn("ff_promote_delayed")
def promote_delayed(k: ExecKeys, lk: LaneKeys, *, now_ms: int) -> Call:
    return Call("ff_promote_delayed", [k.core, lk.delayed, lk.eligible], [k.eid, now_ms])


# ---------------------------------------------------------------- signal.lua
@fn("ff_claim_resumed_execution")
def claim_resumed_execution(
    k: ExecKeys, *, lane: str, worker_id: str, worker_instance_id: str, lease_id: str, lease_ttl_ms: int,
    attempt_index: int, remaining_attempt_timeout_ms: int | None = None,
) -> Call:
    lk, ix = k.lane(lane), k.idx
    return Call("ff_claim_resumed_execution", [
        k.core, k.claim_grant, lk.eligible, ix.lease_expiry, ix.worker_leases(worker_instance_id),
        k.attempt(attempt_index), k.lease_current, k.lease_history, lk.active, ix.attempt_timeout,
        ix.execution_deadline,
    ], [k.eid, worker_id, worker_instance_id, lane, "", lease_id, lease_ttl_ms, opt(remaining_attempt_timeout_ms)])


@fn("ff_issue_grant_and_claim")
def issue_grant_and_claim(
    k: ExecKeys, *, lane: str, worker_id: str, worker_instance_id: str, lease_id: str, attempt_id: str,
    lease_ttl_ms: int, attempt_policy_json: str = "{}", attempt_timeout_ms: int | None = None,
    execution_deadline_at: int | None = None,
) -> Call:
    """Ours (upstream v0.13's name and order, lua/grant_claim.lua): grant + claim in one call, no capability
    check. Reply fields: lease_id, lease_epoch, attempt_index."""
    lk, ix = k.lane(lane), k.idx
    return Call("ff_issue_grant_and_claim", [
        k.core, k.claim_grant, lk.eligible, ix.lease_expiry, ix.worker_leases(worker_instance_id), k.attempts,
        k.lease_current, k.lease_history, lk.active, ix.attempt_timeout, ix.execution_deadline,
    ], [
        k.eid, worker_id, worker_instance_id, lane, "", lease_id, lease_ttl_ms, attempt_id, attempt_policy_json,
        opt(attempt_timeout_ms), opt(execution_deadline_at),
    ])


# ---------------------------------------------------------------- budget.lua (admission blocks)
BLOCK_TARGETS = {"waiting_for_budget": "blocked:budget", "waiting_for_quota": "blocked:quota",
                 "waiting_for_capable_worker": "blocked:route", "paused_by_operator": "blocked:operator"}


@fn("ff_block_execution_for_admission")
def block_execution_for_admission(k: ExecKeys, *, lane: str, reason: str, detail: str, now_ms: int) -> Call:
    lk = k.lane(lane)
    target = lk.index(BLOCK_TARGETS.get(reason, "blocked:route"))
    return Call("ff_block_execution_for_admission", [k.core, lk.eligible, target], [k.eid, reason, detail, now_ms])


@fn("ff_unblock_execution")
def unblock_execution(k: ExecKeys, *, lane: str, blocked_index: str, expected_reason: str, now_ms: int) -> Call:
    lk = k.lane(lane)
    return Call("ff_unblock_execution", [k.core, lk.index(blocked_index), lk.eligible],
                [k.eid, now_ms, expected_reason])


# ---------------------------------------------------------------- flow.lua (replay)
@fn("ff_replay_execution")
def replay_execution(k: ExecKeys, *, lane: str, now_ms: int = 0, edge_ids: list[str] | None = None) -> Call:
    lk = k.lane(lane)
    keys = [k.core, lk.terminal, lk.eligible, k.lease_history]
    args: list[Arg] = [k.eid, now_ms]
    if edge_ids is not None:
        keys += [lk.blocked_dependencies, k.deps_meta, k.deps_unresolved] + [k.dep_edge(e) for e in edge_ids]
        args += list(edge_ids)
    return Call("ff_replay_execution", keys, args)
