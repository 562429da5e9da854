"""Operator actions: call ffcore, translate engine refusals into words, append the audit entry.

Views call these and never talk to Valkey themselves; every outcome (done or refused) is audited.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

import redis

from ffcore import audit
from ffcore.backend import Backend
from ffcore.errors import FFError, InvalidId, ScriptError
from ffcore.execution import bulk, rules
from ffcore.execution.client import Client
from ffcore.worker.grants import issue_grant_and_claim

from .. import audit_trail

REFUSALS = {
    "execution_not_found": "No execution has this id.",
    "execution_not_active": "The execution is not active{outcome}.",
    "execution_not_terminal": "Only finished executions can be replayed; this one has not finished.",
    "max_replays_exhausted": "This execution has been replayed the maximum number of times.",
    "execution_not_eligible": "Priority can only change while the execution is waiting for a worker.",
    "no_active_lease": "The execution holds no lease to revoke.",
    "stale_lease": "The lease changed meanwhile; reload and try again.",
    "lease_revoked": "The lease was already revoked.",
    "invalid_input": "The engine rejected the input: {detail}",
}


#: Refusals that named nothing: answered 404 and not audited (the rule lives in audit_trail).
NOT_FOUND = audit_trail.NOT_FOUND


@dataclass(frozen=True)
class ActionResult:
    ok: bool
    message: str
    code: str = ""

    @property
    def not_found(self) -> bool:
        return not self.ok and self.code in NOT_FOUND

    @property
    def status(self) -> int:
        """The HTTP status a page answers with: 200 done, 404 nothing to act on, 409 refused by the engine."""
        return 200 if self.ok else 404 if self.not_found else 409


def refusal_text(e: ScriptError) -> str:
    template = REFUSALS.get(e.code, "The engine refused: {code}.")
    outcome = f" (it already finished: {e.details[0]})" if e.details and e.details[0] not in ("", "none") else ""
    return template.format(outcome=outcome, detail=", ".join(e.details), code=e.code)


def run_action(backend: Backend, actor: str, action: str, target: str, reason: str, fn: Callable[[], str], *,
               detail: str | Callable[[], str] = "",
               refusal: Callable[[ScriptError], str] = refusal_text) -> ActionResult:
    """Run `fn` (the ffcore operation, which also announces the change; returns the success message), put
    refusals into words, and write the audit entry either way (`detail` is read after `fn` ran)."""
    error: Exception | None = None
    try:
        result = ActionResult(True, fn(), "OK")
    except ScriptError as e:
        error, result = e, ActionResult(False, refusal(e), e.code)
    except InvalidId as e:
        error, result = e, ActionResult(False, str(e), "invalid_id")
    except (redis.ConnectionError, redis.TimeoutError) as e:
        error, result = e, ActionResult(False, "Valkey is unreachable; nothing was changed. Try again.", "unavailable")
    except FFError as e:  # e.g. a flow that kept changing under an optimistic retry loop
        error, result = e, ActionResult(False, str(e), "conflict")
    text = "" if error is not None else detail() if callable(detail) else detail
    audit_trail.record(backend, actor=actor, action=action, target=target, reason=reason, error=error, detail=text)
    return result


def _run(backend: Backend, actor: str, action: str, target: str, reason: str, fn: Callable[[], object], done: str,
         detail: str = "", rule: str = "") -> ActionResult:
    """run_action for calls returning an engine reply: a non-OK status ("already …") is reported as such.

    `rule` names the execution action in ffcore.execution.rules: a state the engine would refuse is
    refused with the engine's code before the call (the page offered the form when the state allowed it).
    """

    def message() -> str:
        if rule:
            rules.precheck(backend, target, rule)
        reply = fn()
        status = getattr(reply, "status", "OK")
        return done if status == "OK" else f"Nothing to do ({' '.join(getattr(reply, 'fields', []))})."

    return run_action(backend, actor, action, target, reason, message, detail=detail)


def cancel(backend: Backend, actor: str, eid: str, reason: str) -> ActionResult:
    c = Client(backend)
    return _run(backend, actor, "cancel", eid, reason, lambda: c.cancel(eid, reason=reason), "Cancelled.",
                rule="cancel")


def replay(backend: Backend, actor: str, eid: str, reason: str) -> ActionResult:
    c = Client(backend)
    return _run(backend, actor, "replay", eid, reason, lambda: c.replay(eid),
                "Replayed: the execution is queued again.", rule="replay")


def change_priority(backend: Backend, actor: str, eid: str, reason: str, priority: int) -> ActionResult:
    c = Client(backend)
    return _run(backend, actor, "change_priority", eid, reason, lambda: c.change_priority(eid, priority),
                f"Priority set to {priority}.", detail=f"priority={priority}", rule="priority")


def revoke_lease(backend: Backend, actor: str, eid: str, reason: str) -> ActionResult:
    c = Client(backend)
    return _run(backend, actor, "revoke_lease", eid, reason, lambda: c.revoke_lease(eid, reason=reason[:200]),
                "Lease revoked: another worker can reclaim the execution.", rule="revoke")


#: "Take now" refusals, in words (the engine's codes from ff_issue_grant_and_claim).
TAKE_REFUSALS = {
    "execution_not_eligible": "Only an execution waiting for a worker (or blocked by its quota) can be taken now.",
    "grant_already_exists": "A worker is being granted this execution right now; reload and try again.",
    "execution_not_in_eligible_set": "The execution is not in its lane's queue; reload and try again.",
    "lease_conflict": "Another lease holds the execution.",
    "active_attempt_exists": "An attempt of this execution is already running.",
}


def take_now(backend: Backend, actor: str, eid: str, reason: str, lease_ms: int) -> ActionResult:
    """Lease the execution to `operator` now (ffcore.worker.grants.issue_grant_and_claim)."""

    taken: list[str] = []

    def run() -> str:
        rules.precheck(backend, eid, "take")
        t = issue_grant_and_claim(backend, eid, lease_duration_ms=lease_ms)
        taken.append(audit_trail.take_detail(lease_ms, t.lease_id, t.lease_epoch, t.attempt_index))
        return (f"Taken: leased to operator for {lease_ms // 1000} s (attempt {t.attempt_index}, epoch "
                f"{t.lease_epoch}). When the lease runs out, a worker of the lane reclaims it.")

    def words(e: ScriptError) -> str:
        return TAKE_REFUSALS[e.code] if e.code in TAKE_REFUSALS else refusal_text(e)

    return run_action(backend, actor, "grant_and_claim", eid, reason, run,
                      detail=lambda: taken[0] if taken else audit_trail.take_detail(lease_ms), refusal=words)


# ------------------------------------------------------------------ bulk
def bulk_start(backend: Backend, actor: str, action: str, reason: str, eids: list[str]) -> str:
    """Start a bulk cancel/replay in a background thread; returns the job id to poll."""
    job = bulk.start_job(backend, action=action, actor=actor, reason=reason, total=len(eids))

    def audit_batch(results: list[tuple[str, bool, str]]) -> None:
        audit.record_many(backend, [{"actor": actor, "action": f"bulk_{action}", "target": eid, "reason": reason,
                                     "outcome": "ok" if ok else f"refused: {code}", "detail": f"job {job}"}
                                    for eid, ok, code in results])

    def run() -> None:
        try:
            bulk.run_job(backend, job, action, eids, reason, on_batch=audit_batch)
        except Exception as e:  # keep the failure visible on the progress page
            bulk.fail_job(backend, job, str(e))

    threading.Thread(target=run, name=f"bulk-{job}", daemon=True).start()
    return job
