"""A plain-language line saying why an execution is or isn't running, from its core record."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime


@dataclass(frozen=True)
class Why:
    text: str
    #: What the line points at (a waitpoint id, worker instance, budget id…) for linking; "" if none.
    ref_kind: str = ""
    ref: str = ""


def fmt_ms(ms: str | int | None) -> str:
    try:
        v = int(ms or 0)
    except (TypeError, ValueError):
        return str(ms)
    if v <= 0:
        return ""
    return datetime.fromtimestamp(v / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


_DOUBLED = re.compile(r"\b([a-z]+)_\1_")

_BLOCKED = {
    "blocked_by_dependencies": "Blocked by dependencies: waiting for upstream executions to finish",
    "blocked_by_budget": "Blocked by budget",
    "blocked_by_quota": "Blocked by quota",
    "blocked_by_route": "Blocked by route: no live worker has the required capabilities",
    "blocked_by_lane_state": "Blocked: the lane is paused",
    "blocked_by_operator": "Blocked by an operator",
}

_OUTCOME = {
    "success": "Finished successfully",
    "failed": "Failed",
    "cancelled": "Cancelled",
    "expired": "Expired",
    "skipped": "Skipped because a dependency can no longer be satisfied",
}


def _reclaim_next(lane: str, serving: frozenset[str] | None) -> str:
    # Workers reclaim on their own claim loop (ffcore/worker/claiming.py `reclaim`): only one serving the lane.
    if serving is not None and lane not in serving:
        return f"no live worker serves lane {lane}, so nothing reclaims it until one starts"
    return f"a live worker on lane {lane} reclaims it on its next claim pass and starts a new attempt"


def why(core: dict[str, str], serving: frozenset[str] | None = None) -> Why:
    """`serving`: the lanes live workers serve (from the worker registry); None when unknown (not checked)."""
    lane = core.get("lane_id", "") or "default"
    phase = core.get("lifecycle_phase", "")
    own = core.get("ownership_state", "")
    elig = core.get("eligibility_state", "")
    reason = core.get("blocking_reason", "")
    detail = core.get("blocking_detail", "")
    if phase == "terminal":
        outcome = core.get("terminal_outcome", "")
        text = _OUTCOME.get(outcome, "Finished")
        # The contract writes "lease_" .. ownership_state ("lease_lease_revoked"): drop the doubled prefix.
        # A success after a retry keeps the earlier attempt's failure_reason: not a reason for finishing well.
        reason = "" if outcome == "success" else core.get("failure_reason") or core.get("cancellation_reason") or ""
        extra = _DOUBLED.sub(r"\1_", reason)
        when = fmt_ms(core.get("completed_at"))
        return Why(text + (f" at {when}" if when else "") + (f": {extra}" if extra else ""))
    if phase == "active":
        worker = core.get("current_worker_instance_id", "")
        if own == "leased":
            return Why(f"Running: leased by worker {core.get('current_worker_id', '')} ({worker}) until "
                       f"{fmt_ms(core.get('lease_expires_at'))}", "worker", worker)
        if own == "lease_expired_reclaimable":
            return Why(f"Lease expired at {fmt_ms(core.get('lease_expired_at'))}; "
                       + _reclaim_next(lane, serving), "worker", worker)
        if own == "lease_revoked":
            return Why(f"Lease revoked by an operator ({core.get('lease_revoke_reason', '')}); the worker that held it "
                       "learns at its next renewal or call and its result is refused; "
                       + _reclaim_next(lane, serving), "worker", worker)
        return Why("Active")
    if phase == "suspended":
        wp = core.get("current_waitpoint_id", "")
        return Why(f"Suspended on waitpoint {wp} ({reason.replace('_', ' ')})", "waitpoint", wp)
    if phase == "runnable":
        if elig == "eligible_now":
            if serving is not None and lane not in serving:
                return Why(f"No live worker serves lane {lane}: it runs once a worker for that lane starts")
            return Why("Waiting for a worker on lane " + lane)
        if elig == "not_eligible_until_time":
            until = fmt_ms(core.get("delay_until"))
            if reason == "waiting_for_retry_backoff":
                return Why(f"Retry backoff until {until}" if until else "Retry backoff")
            if reason == "waiting_for_resume_delay":
                return Why(f"Resume delayed until {until}" if until else "Resume delayed")
            return Why(f"Delayed until {until}" if until else "Delayed")
        if elig in _BLOCKED:
            return Why(_BLOCKED[elig] + (f" — {detail}" if detail and elig != "blocked_by_dependencies" else ""))
    return Why(detail or phase or "Unknown state")
