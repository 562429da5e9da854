"""Every REST write leaves one audit entry and one live event, like the dashboard's actions.

Handlers wrap their engine call in `with audited(request, action, target, reason) as a:`; the entry records
who (`api-token` or the session's user), what, on which target, the reason when one was given, and the
outcome. Requests that named nothing (unknown id) leave no entry: like a form error they change nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import redis
from django.http import HttpRequest

from ffcore import audit, events
from ffcore.errors import InvalidId, ScriptError

from ..actions import NOT_FOUND
from ..engine import get_backend
from .access import Denied, principal
from .errors import NotFound

#: Longest reason kept in the trail (the dashboard's forms have the same cap).
REASON_MAX = 1000


@dataclass
class Audited:
    """What a handler may refine while it runs: the target once known (a minted id), extra detail."""

    target: str
    detail: str = ""
    publish: bool = True
    #: False when the call turned out to change nothing (a claim with no work): no entry, no event.
    changed: bool = True


def _refusal(e: BaseException) -> str | None:
    """The outcome text of a refused write, or None when the request named nothing (no entry)."""
    if isinstance(e, NotFound | InvalidId):
        return None
    if isinstance(e, ScriptError):
        return None if e.code in NOT_FOUND else f"refused: {e.code}"
    if isinstance(e, Denied):
        return f"refused: denied ({e.status})"
    if isinstance(e, redis.ConnectionError | redis.TimeoutError):
        return "refused: unavailable"
    return f"refused: {type(e).__name__}"


@contextlib.contextmanager
def audited(request: HttpRequest, action: str, target: str, reason: str | None = "", *,
            detail: str = "", publish: bool = True) -> Iterator[Audited]:
    who = principal(request)
    a = Audited(target, detail, publish)
    backend = get_backend()
    why = (reason or "")[:REASON_MAX]
    try:
        yield a
    except Exception as e:
        outcome = _refusal(e)
        if outcome is not None:
            with contextlib.suppress(redis.ConnectionError, redis.TimeoutError):
                audit.record(backend, actor=who.actor, action=action, target=a.target, reason=why, outcome=outcome,
                             detail=(a.detail or str(e))[:300])
        raise
    if not a.changed:
        return
    if a.publish:
        events.touched(backend, a.target)  # open pages re-render what changed
    # The write is done; a failed audit append must not turn it into an error answer.
    with contextlib.suppress(redis.ConnectionError, redis.TimeoutError):
        audit.record(backend, actor=who.actor, action=action, target=a.target, reason=why, outcome="ok",
                     detail=a.detail)


def note(request: HttpRequest, action: str, target: str, detail: str = "") -> None:
    """Record a sensitive read (a credential handed out) the way writes are recorded."""
    who = principal(request)
    audit.record(get_backend(), actor=who.actor, action=action, target=target, reason="", outcome="ok",
                 detail=detail)
