"""Websocket handshakes checked as strictly as the API (issue #37), and unknown socket paths refused.

Channels' `AllowedHostsOriginValidator` compares only the Origin's host with `ALLOWED_HOSTS`: a page on
another port of 127.0.0.1 passed it, and the Lax session cookie rode along. `OwnOriginOnly` admits a
handshake only when the `Host` is allowed, the `Origin` is exactly this server's scheme://host:port (or one
of `CSRF_TRUSTED_ORIGINS`), and `Sec-Fetch-Site`, when the browser sends it, says same-origin. A refused
handshake is closed before any consumer runs. Embedding projects wrap their socket routes in it too.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.http.request import split_domain_port, validate_host

#: Close code of an unknown socket path (an HTTP 404 at the handshake).
NOT_FOUND = 4404


def _header(scope: dict[str, Any], name: bytes) -> str:
    for k, v in scope.get("headers", ()):
        if k.lower() == name:
            return bytes(v).decode("latin-1")
    return ""


def _scheme(scope: dict[str, Any]) -> str:
    """The page scheme a same-origin socket comes from (https behind a TLS proxy Django trusts)."""
    if scope.get("scheme") == "wss":
        return "https"
    proxy = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if proxy and proxy[0].startswith("HTTP_"):
        header = proxy[0][len("HTTP_"):].lower().replace("_", "-").encode()
        if _header(scope, header).split(",")[0].strip() == proxy[1]:
            return "https"
    return "http"


def own_origin(scope: dict[str, Any]) -> bool:
    """The handshake comes from one of our own pages (see the module docstring)."""
    host, origin = _header(scope, b"host"), _header(scope, b"origin")
    site = _header(scope, b"sec-fetch-site")
    if not host or not origin or (site and site != "same-origin"):
        return False
    domain, _port = split_domain_port(host)
    if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
        return False
    if origin in settings.CSRF_TRUSTED_ORIGINS:
        return True
    parts = urlsplit(origin)
    return parts.scheme == _scheme(scope) and parts.netloc.lower() == host.lower() and not parts.path


class OwnOriginOnly:
    """ASGI middleware for the websocket router: refuses (closes) every handshake `own_origin` rejects."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if scope["type"] == "websocket" and not own_origin(scope):
            await receive()  # websocket.connect
            await send({"type": "websocket.close", "code": 403})
            return None
        return await self.app(scope, receive, send)


class UnknownPath(AsyncWebsocketConsumer):
    """The last route: a socket path we do not serve is refused instead of failing the router (a 500)."""

    async def connect(self) -> None:
        await self.close(code=NOT_FOUND)
