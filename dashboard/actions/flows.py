"""Operator actions: flows and the DAG view (audited, like dashboard.actions)."""

from __future__ import annotations

from ffcore.backend import Backend
from ffcore.errors import ScriptError
from ffcore.flows.cancel import CancelOutcome
from ffcore.flows.flows import Flows

from .. import audit_trail
from . import ActionResult, refusal_text, run_action

FLOW_REFUSALS = {
    "flow_not_found": "No flow has this id.",
}


def _refusal(e: ScriptError) -> str:
    return FLOW_REFUSALS.get(e.code) or refusal_text(e)


def cancel_flow(backend: Backend, actor: str, flow_id: str, reason: str) -> ActionResult:
    """Cancel a flow and (in the background, durably) every unfinished member."""
    done: list[CancelOutcome] = []

    def run() -> str:
        out = Flows(backend).cancel(flow_id, reason=reason)
        done.append(out)
        if out.status == "already_terminal":
            return "The flow was already cancelled; nothing changed."
        if out.status == "scheduled":
            return f"Flow cancelled; cancelling its {len(out.members)} members now."
        return "Flow cancelled."

    return run_action(backend, actor, "cancel_flow", flow_id, reason, run, refusal=_refusal,
                      detail=lambda: audit_trail.flow_cancel_detail(done[0].status, len(done[0].members)))
