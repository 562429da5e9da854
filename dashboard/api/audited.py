"""Every REST write leaves one audit entry, like the dashboard's actions (dashboard.audit_trail).

Handlers wrap their ffcore call — which makes the FCALL and announces the change to live pages — in
`with audited(request, action, target, reason) as a:`; the entry records who (`api-token` or the session's
user), what, on which target, the reason when one was given, and the outcome. Requests that named nothing
(unknown id) leave no entry: like a form error they change nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from django.http import HttpRequest

from .. import audit_trail
from ..backend import get_backend
from .access import principal
from .errors import NotFound


@dataclass
class Audited:
    """What a handler may refine while it runs: the target once known (a minted id), the detail."""

    target: str
    detail: str = ""
    #: False when the call turned out to change nothing (a claim with no work): no entry.
    changed: bool = True


@contextlib.contextmanager
def audited(request: HttpRequest, action: str, target: str, reason: str | None = "", *,
            detail: str = "") -> Iterator[Audited]:
    who = principal(request)
    a = Audited(target, detail)
    try:
        yield a
    except NotFound:
        raise  # named nothing: no entry
    except Exception as e:
        audit_trail.record(get_backend(), actor=who.actor, action=action, target=a.target, reason=reason, error=e)
        raise
    if a.changed:
        audit_trail.record(get_backend(), actor=who.actor, action=action, target=a.target, reason=reason,
                           detail=a.detail)


def note(request: HttpRequest, action: str, target: str, detail: str = "") -> None:
    """Record a sensitive read (a credential handed out) the way writes are recorded."""
    audit_trail.record(get_backend(), actor=principal(request).actor, action=action, target=target, reason="",
                       detail=detail)
