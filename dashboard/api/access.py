"""API access: who may call which route, decided once for every request (docs/deployment.md, Security model).

- A request a browser marks as coming from another site (`Origin` not ours, `Sec-Fetch-Site` other than
  same-origin/none) is refused whatever else it carries: no page elsewhere can drive this API.
- Writes need the bearer token (`FF_API_TOKEN`, compared in constant time) or a signed-in operator session
  with the CSRF header; their bodies must be `application/json` (415 otherwise).
- Reads need the token or any signed-in user. Tokenless reads are off unless `FF_LOOPBACK_READS=1` *and* no
  token is configured; then loopback clients whose request carries no forwarding header may read (never
  write). A reverse proxy on the same host makes every client look like loopback, and its forwarding
  headers give it away. `up` always configures a token and never needs this.
- Admin routes (secret rotation, raw waitpoint tokens) need the token; rotation also accepts a superuser
  session, which may not choose the new secret.
"""

from __future__ import annotations

import hmac
import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.http import HttpRequest
from django.middleware.csrf import CsrfViewMiddleware

from ..access import is_operator

_LOOPBACK = {"127.0.0.1", "::1", "localhost"}
#: Headers a reverse proxy adds: with one present, REMOTE_ADDR is the proxy's address, not the client's.
_FORWARDED = ("HTTP_FORWARDED", "HTTP_X_FORWARDED_FOR", "HTTP_X_FORWARDED_HOST", "HTTP_X_REAL_IP")
_SAFE = {"GET", "HEAD", "OPTIONS"}
#: Sec-Fetch-Site values a browser sends for our own pages and for typed-in URLs.
_OWN_SITE = {"same-origin", "none"}
#: The actor name audit entries carry for bearer-token callers.
TOKEN_ACTOR = "api-token"


class Denied(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Principal:
    """Who is calling: `kind` is "token", "session" or "loopback"; `actor` is what the audit trail shows."""

    kind: str
    actor: str
    user: Any = None

    @property
    def is_token(self) -> bool:
        return self.kind == "token"

    @property
    def is_superuser(self) -> bool:
        return bool(self.user is not None and self.user.is_superuser)


def api_token() -> str:
    return os.environ.get("FF_API_TOKEN", "")


def loopback_reads() -> bool:
    """Tokenless loopback reads were asked for (FF_LOOPBACK_READS=1) and no token is configured."""
    return os.environ.get("FF_LOOPBACK_READS", "").strip() == "1" and not api_token()


def startup_warning() -> str | None:
    """What a dashboard server started without FF_API_TOKEN prints once (None when a token is set)."""
    if api_token():
        return None
    reads = ("tokenless loopback reads are ON (FF_LOOPBACK_READS=1): behind a reverse proxy on this host "
             "set FF_API_TOKEN instead" if loopback_reads() else
             "only signed-in sessions reach the REST API (FF_LOOPBACK_READS=1 allows tokenless loopback reads)")
    return f"WARNING: FF_API_TOKEN is not set: API clients cannot authenticate; {reads}."


def _direct_loopback(request: HttpRequest) -> bool:
    if request.META.get("REMOTE_ADDR", "") not in _LOOPBACK:
        return False
    return not any(request.META.get(h) for h in _FORWARDED)


def has_token(request: HttpRequest) -> bool:
    """The request carries the configured API token (never true when none is configured)."""
    token = api_token()
    return bool(token) and _bearer_ok(request, token)


def _bearer_ok(request: HttpRequest, token: str) -> bool:
    header = request.headers.get("Authorization", "")
    if not header.startswith("Bearer "):
        return False
    return hmac.compare_digest(header[len("Bearer "):].encode(), token.encode())


def _csrf_ok(request: HttpRequest) -> bool:
    reason = CsrfViewMiddleware(lambda r: None).process_view(request, lambda r: None, (), {})  # type: ignore[arg-type,return-value]
    return reason is None


def _own_origin(request: HttpRequest, origin: str) -> bool:
    if origin in settings.CSRF_TRUSTED_ORIGINS:
        return True
    parts = urlsplit(origin)
    return parts.scheme in ("http", "https") and parts.netloc == request.get_host()


def refuse_cross_site(request: HttpRequest) -> None:
    """403 for anything a browser says another site sent; non-browser clients send neither header."""
    site = request.headers.get("Sec-Fetch-Site", "")
    if site and site not in _OWN_SITE:
        raise Denied(403, f"cross-site request refused (Sec-Fetch-Site: {site[:32]})")
    origin = request.headers.get("Origin", "")
    if origin and not _own_origin(request, origin):
        raise Denied(403, "cross-origin request refused (Origin is not this dashboard)")


def require_json_body(request: HttpRequest) -> None:
    """A write's body, when it has one, must be declared JSON: a browser can send `text/plain` to any
    site without a preflight, `application/json` only to its own."""
    if not request.body:
        return
    ctype = request.content_type or ""
    if ctype != "application/json" and not (ctype.startswith("application/") and ctype.endswith("+json")):
        raise Denied(415, f"request bodies must be application/json (got {ctype or 'no Content-Type'})")


def authorize(request: HttpRequest) -> Principal:
    """The ninja `auth` callable: returns the Principal or raises Denied (401/403/415)."""
    refuse_cross_site(request)
    write = request.method not in _SAFE
    if write:
        require_json_body(request)
    if has_token(request):
        return Principal("token", TOKEN_ACTOR)
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        if write:
            if not is_operator(user):
                raise Denied(403, "this operation needs the operator role")
            if not _csrf_ok(request):
                raise Denied(403, "CSRF check failed: send the X-CSRFToken header with session auth")
        return Principal("session", user.get_username(), user)
    if loopback_reads() and _direct_loopback(request):
        if write:
            raise Denied(401, "writes need `Authorization: Bearer <token>` (FF_API_TOKEN) or an operator session; "
                              "tokenless loopback clients may only read")
        return Principal("loopback", "loopback")
    raise Denied(401, "missing or invalid Authorization header")


def principal(request: HttpRequest) -> Principal:
    """The caller `authorize` admitted (ninja keeps it on `request.auth`)."""
    p = getattr(request, "auth", None)
    if not isinstance(p, Principal):  # every route is authenticated; this is a wiring mistake
        raise Denied(401, "missing or invalid Authorization header")
    return p


def require_token(request: HttpRequest, what: str) -> Principal:
    p = principal(request)
    if not p.is_token:
        raise Denied(403, f"{what} needs the API token (Authorization: Bearer $FF_API_TOKEN)")
    return p
