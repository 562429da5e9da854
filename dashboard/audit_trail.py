"""The audit entry of a write, the same from every door: the dashboard's actions, bulk jobs and the REST API.

An entry is (actor, action, target, reason, outcome, detail). `outcome` is "ok" or "refused: <code>"; a
write that named nothing (an unknown or malformed id) leaves no entry, like a form error. Details are
door-independent (built here or by the action), so the same write through two doors reads the same.
"""

from __future__ import annotations

import contextlib

import redis

from ffcore import audit
from ffcore.backend import Backend
from ffcore.errors import FFError, InvalidId, ScriptError

#: Refusals meaning the request named nothing (no such execution, waitpoint, flow or budget, or an id from
#: another partition): nothing is written, not even an entry (issue #12: a refused request leaves Valkey as
#: it was).
NOT_FOUND = frozenset({"execution_not_found", "waitpoint_not_found", "flow_not_found", "budget_not_found",
                       "invalid_id"})
#: Longest reason and detail kept.
REASON_MAX = 1000
DETAIL_MAX = 300


def refusal_code(e: BaseException) -> str:
    """The code a refused write is recorded and reported under."""
    if isinstance(e, ScriptError):
        return e.code
    if isinstance(e, InvalidId):
        return "invalid_id"
    if isinstance(e, redis.ConnectionError | redis.TimeoutError):
        return "unavailable"
    if isinstance(e, FFError):
        return "conflict"
    return getattr(e, "code", "") or type(e).__name__


def outcome_of(e: BaseException | None) -> str | None:
    """"ok", "refused: <code>", or None when the write named nothing (no entry)."""
    if e is None:
        return "ok"
    code = refusal_code(e)
    return None if code in NOT_FOUND else f"refused: {code}"


def record(backend: Backend, *, actor: str, action: str, target: str, reason: str | None,
           error: BaseException | None = None, detail: str = "") -> bool:
    """Append the entry for a write that ran (error=None) or was refused; False when none is due. A failed
    append never turns the write's own answer into an error."""
    outcome = outcome_of(error)
    if outcome is None:
        return False
    if error is not None and not detail:
        detail = str(error)
    with contextlib.suppress(redis.ConnectionError, redis.TimeoutError):
        audit.record(backend, actor=actor, action=action, target=target, reason=(reason or "")[:REASON_MAX],
                     outcome=outcome, detail=detail[:DETAIL_MAX])
    return True


def signal_detail(waitpoint_id: str, name: str, payload_len: int, effect: str) -> str:
    return f"waitpoint {waitpoint_id}: signal {name!r}, payload {payload_len} bytes -> {effect}"


def flow_cancel_detail(status: str, members: int) -> str:
    return f"{status}: {members} member(s)"


def take_detail(lease_ms: int, lease_id: str = "", epoch: int = 0, attempt: int = 0) -> str:
    """An operator's take (grant and claim): the lease asked for, and what was granted when it was."""
    return f"lease={lease_ms}ms" + (f" lease_id={lease_id} epoch={epoch} attempt={attempt}" if lease_id else "")


def schedule_detail(name: str, execution_id: str = "") -> str:
    """A schedule's operator action: the execution a trigger made, else the schedule's name."""
    return f"execution {execution_id}" if execution_id else name

