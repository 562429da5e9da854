"""Operator actions: flows and the DAG view (audited, like dashboard.actions)."""

from __future__ import annotations

import contextlib

import redis

from ffcore import audit
from ffcore.backend import Backend
from ffcore.errors import FFError, InvalidId, ScriptError
from ffcore.flow_cancel import cancel_flow as engine_cancel_flow

from . import ActionResult

FLOW_REFUSALS = {
    "flow_not_found": "No flow has this id.",
}


def cancel_flow(backend: Backend, actor: str, flow_id: str, reason: str) -> ActionResult:
    """Cancel a flow and (in the background, durably) every unfinished member."""
    try:
        out = engine_cancel_flow(backend, flow_id, reason=reason)
        if out.status == "already_terminal":
            result = ActionResult(True, "The flow was already cancelled; nothing changed.", out.status)
        elif out.status == "scheduled":
            result = ActionResult(True, f"Flow cancelled; cancelling its {len(out.members)} members now.",
                                  out.status)
        else:
            result = ActionResult(True, "Flow cancelled.", out.status)
    except InvalidId as e:
        result = ActionResult(False, str(e), "invalid_id")
    except ScriptError as e:
        result = ActionResult(False, FLOW_REFUSALS.get(e.code, f"The engine refused: {e.code}."), e.code)
    except (redis.ConnectionError, redis.TimeoutError):
        result = ActionResult(False, "Valkey is unreachable; nothing was changed. Try again.", "unavailable")
    except FFError as e:
        result = ActionResult(False, str(e), "conflict")
    if result.not_found:
        return result  # bad input: nothing to audit (see actions.NOT_FOUND)
    outcome = "ok" if result.ok else f"refused: {result.code}"
    with contextlib.suppress(redis.ConnectionError, redis.TimeoutError):
        audit.record(backend, actor=actor, action="cancel_flow", target=flow_id, reason=reason, outcome=outcome,
                     detail=result.message)
    return result
