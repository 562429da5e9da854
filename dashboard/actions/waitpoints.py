"""Operator actions: waitpoints inbox and signals (audited, like dashboard.actions).

The operator never handles a waitpoint token: signals are delivered here, server-side, with the token
stored on the waitpoint (`Signals.deliver_with_stored_token`).
"""

from __future__ import annotations

from collections.abc import Callable

from ffcore.backend import Backend
from ffcore.errors import ScriptError
from ffcore.functions import Signal
from ffcore.ids import ExecutionId
from ffcore.suspension.signals import APPENDED, BUFFERED, NO_OP, RESUMED, SignalOutcome, Signals, read_waitpoint

from .. import audit_trail
from . import ActionResult, refusal_text, run_action

_TOKEN = ("The waitpoint's stored token was refused ({code}): its HMAC secret may have been rotated out of the "
          "grace window. Resume or cancel the execution instead.")
REFUSALS = {
    "waitpoint_not_found": "No waitpoint with this id belongs to the execution.",
    "waitpoint_closed": "The waitpoint is already closed.",
    "waitpoint_not_open": "The waitpoint is not open.",
    "target_not_signalable": "The execution can no longer be signalled: it finished or the waitpoint is closed.",
    "execution_not_suspended": "The execution is not suspended.",
    "signal_limit_exceeded": "The execution has received the maximum number of signals.",
    "execution_not_found": "No execution has this id.",
    "waitpoint_active": "This waitpoint belongs to a suspended execution: signal, resume or cancel the execution "
                        "instead of closing it.",
    **dict.fromkeys(("invalid_token", "token_expired", "missing_token", "invalid_secret",
                     "hmac_secret_not_initialized", "invalid_keys_missing_hmac"), _TOKEN),
}

EFFECTS = {
    RESUMED: "Signal delivered: the resume condition is satisfied and the execution is waiting for a worker.",
    APPENDED: "Signal delivered: it matched, and the condition still waits for more signals.",
    NO_OP: "Signal recorded, but it matched no expected signal name: nothing changed.",
    BUFFERED: "Signal buffered on the pending waitpoint: it counts when the worker suspends on it.",
    "duplicate": "Already delivered (this form was submitted before): nothing changed.",
}


def _refusal(e: ScriptError) -> str:
    return REFUSALS[e.code].format(code=e.code) if e.code in REFUSALS else refusal_text(e)


def _run(backend: Backend, actor: str, action: str, target: str, reason: str, fn: Callable[[], str],
         detail: str | Callable[[], str]) -> ActionResult:
    return run_action(backend, actor, action, target, reason, fn, detail=detail, refusal=_refusal)


def signal(backend: Backend, actor: str, eid: str, waitpoint_id: str, reason: str, *, name: str, payload: bytes,
           idempotency_key: str = "") -> ActionResult:
    """Deliver a signal as the operator (source_type `operator`, identity = the operator's user name)."""
    sig = Signal(name, category="operator", source_type="operator", source_identity=actor, payload=payload,
                 idempotency_key=idempotency_key, correlation_id=reason[:200])

    effect: list[str] = []

    def run() -> str:
        out: SignalOutcome = Signals(backend).deliver_with_stored_token(eid, waitpoint_id, sig)
        effect.append("duplicate" if out.duplicate else out.effect)
        return EFFECTS.get(effect[0], f"Signal delivered ({out.effect}).")

    return _run(backend, actor, "signal", eid, reason, run,
                lambda: audit_trail.signal_detail(waitpoint_id, name, len(payload), effect[0]))


def resume(backend: Backend, actor: str, eid: str, reason: str) -> ActionResult:
    def run() -> str:
        state = Signals(backend).resume(eid, trigger_type="operator")
        return f"Resumed without a signal: the execution is {state.replace('_', ' ')}."

    return _run(backend, actor, "resume", eid, reason, run, "operator resume")


def close_waitpoint(backend: Backend, actor: str, eid: str, waitpoint_id: str, reason: str) -> ActionResult:
    """Close a pending waitpoint. An active one belongs to a suspended execution: closing it would not stop
    its signals nor wake it, so the operator is pointed at resume/cancel instead."""

    def run() -> str:
        wp = read_waitpoint(backend, ExecutionId(eid), waitpoint_id)
        if wp.get("state") == "active":
            raise ScriptError("waitpoint_active", [], "close_waitpoint")
        got = Signals(backend).close_waitpoint(eid, waitpoint_id, reason="operator_close")
        return "The waitpoint was already closed." if got == "already_closed" else "Waitpoint closed."

    return _run(backend, actor, "close_waitpoint", eid, reason, run, f"waitpoint {waitpoint_id}")


def bulk_signal_start(backend: Backend, actor: str, reason: str, targets: list[tuple[str, str]], *, name: str,
                      payload: bytes) -> str:
    """Deliver one operator signal to many waitpoints in a background bulk job (ffcore.execution.bulk, like
    bulk cancel): one audit entry per waitpoint (action bulk_signal, detail "job <id>"); returns the job id."""
    import threading

    from ffcore import audit
    from ffcore.execution import bulk

    job = bulk.start_job(backend, action="signal", actor=actor, reason=reason, total=len(targets))
    sig = Signal(name, category="operator", source_type="operator", source_identity=actor, payload=payload,
                 correlation_id=reason[:200])

    def audit_batch(results: list[tuple[str, bool, str]]) -> None:
        audit.record_many(backend, [{"actor": actor, "action": "bulk_signal", "target": eid, "reason": reason,
                                     "outcome": "ok" if ok else f"refused: {code}", "detail": f"job {job}"}
                                    for eid, ok, code in results])

    def run() -> None:
        try:
            bulk.run_signal_job(backend, job, targets, sig, on_batch=audit_batch)
        except Exception as e:  # keep the failure visible on the progress page
            bulk.fail_job(backend, job, str(e))

    threading.Thread(target=run, name=f"bulk-signal-{job}", daemon=True).start()
    return job
