"""A command Valkey refuses (`ResponseError`) answered without its internal text (issue #37).

Its message names Valkey/Lua internals (key names, script lines), so clients get a fixed sentence and the
server log gets the detail. On a read it is the request's arguments Valkey could not use (400); on a write
it may be the server's state (out of memory, a missing function), so it stays a 5xx.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import redis
from django.http import HttpRequest, HttpResponse

log = logging.getLogger("dashboard.valkey")

_READS = {"GET", "HEAD", "OPTIONS"}
READ_REFUSED = "Valkey could not serve this read with these arguments."
WRITE_REFUSED = "Valkey refused this write; the server log has the detail."


def refusal(request: HttpRequest, exc: redis.ResponseError) -> tuple[int, str]:
    """(status, public message) for a refused command; logs what Valkey said."""
    log.warning("valkey refused %s %s: %s", request.method, request.path, exc)
    return (400, READ_REFUSED) if request.method in _READS else (500, WRITE_REFUSED)


class ValkeyRefusalMiddleware:
    """The same answer for the pages (the REST API maps it in dashboard/api/errors.py)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exc: Exception) -> HttpResponse | None:
        if not isinstance(exc, redis.ResponseError):
            return None
        status, message = refusal(request, exc)
        return HttpResponse(message, status=status, content_type="text/plain")
