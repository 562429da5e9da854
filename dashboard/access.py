"""Who may do what: `viewer` reads, `operator` (or a superuser) acts."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden

OPERATOR_GROUP = "operator"
VIEWER_GROUP = "viewer"


def is_operator(user: Any) -> bool:
    if not getattr(user, "is_authenticated", False):
        return False
    return bool(user.is_superuser or user.groups.filter(name=OPERATOR_GROUP).exists())


def operator_required(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Signed in (else redirect to sign-in) and an operator (else 403)."""

    @login_required
    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not is_operator(request.user):
            return HttpResponseForbidden("Only operators may do this.")
        return view(request, *args, **kwargs)

    return wrapped


def role_context(request: HttpRequest) -> dict[str, Any]:
    """Template context processor: `is_operator` for showing or hiding action forms. Error pages rendered
    before the auth middleware ran (a disallowed Host) have no user: nobody is an operator there."""
    return {"is_operator": is_operator(getattr(request, "user", None))}
