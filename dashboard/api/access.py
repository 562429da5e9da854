"""API access: bearer token (constant-time) or a signed-in session with the needed role.

With no FF_API_TOKEN configured, only loopback clients (or signed-in users) are served. Reads need any
signed-in user (viewer); writes need an operator, and session writes also need the CSRF header.
"""

from __future__ import annotations

import hmac
import os
from typing import Any

from django.http import HttpRequest
from django.middleware.csrf import CsrfViewMiddleware

from ..access import is_operator

_LOOPBACK = {"127.0.0.1", "::1", "localhost"}
_SAFE = {"GET", "HEAD", "OPTIONS"}


class Denied(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def api_token() -> str:
    return os.environ.get("FF_API_TOKEN", "")


def _bearer_ok(request: HttpRequest, token: str) -> bool:
    header = request.headers.get("Authorization", "")
    if not header.startswith("Bearer "):
        return False
    return hmac.compare_digest(header[len("Bearer "):].encode(), token.encode())


def _csrf_ok(request: HttpRequest) -> bool:
    reason = CsrfViewMiddleware(lambda r: None).process_view(request, lambda r: None, (), {})  # type: ignore[arg-type,return-value]
    return reason is None


def authorize(request: HttpRequest) -> Any:
    """The ninja `auth` callable: returns a truthy principal or raises Denied (401/403)."""
    token = api_token()
    if token and _bearer_ok(request, token):
        return "token"
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        if request.method not in _SAFE:
            if not is_operator(user):
                raise Denied(403, "this operation needs the operator role")
            if not _csrf_ok(request):
                raise Denied(403, "CSRF check failed: send the X-CSRFToken header with session auth")
        return user
    if not token and request.META.get("REMOTE_ADDR", "") in _LOOPBACK:
        return "loopback"
    raise Denied(401, "missing or invalid Authorization header")
