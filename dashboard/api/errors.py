"""ffcore exceptions and framework errors mapped to HTTP once, as JSON `{error, kind?, retryable?}`."""

from __future__ import annotations

from typing import Any

import redis
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError

from ffcore.errors import InvalidId, ScriptError

from .access import Denied


class NotFound(Exception):
    pass


def _fields(errors: list[dict[str, Any]]) -> list[dict[str, str]]:
    out = []
    for e in errors:
        loc = [str(x) for x in e.get("loc", ()) if x not in ("body", "query", "path", "payload", "q")]
        if not loc and "input_payload" in str(e.get("msg", "")):
            loc = ["input_payload"]
        out.append({"field": ".".join(loc) or "body", "message": str(e.get("msg", "invalid"))})
    return out


def install(api: NinjaAPI) -> None:
    def json(request: HttpRequest, status: int, body: dict[str, Any]) -> HttpResponse:
        return api.create_response(request, body, status=status)

    @api.exception_handler(Denied)
    def denied(request: HttpRequest, exc: Denied) -> HttpResponse:
        return json(request, exc.status, {"error": str(exc)})

    @api.exception_handler(AuthenticationError)
    def unauth(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
        return json(request, 401, {"error": "missing or invalid Authorization header"})

    @api.exception_handler(ValidationError)
    def invalid(request: HttpRequest, exc: ValidationError) -> HttpResponse:
        fields = _fields(list(exc.errors))
        names = ", ".join(f["field"] for f in fields)
        return json(request, 422, {"error": f"invalid request: {names}", "kind": "validation", "fields": fields})

    @api.exception_handler(InvalidId)
    def bad_id(request: HttpRequest, exc: InvalidId) -> HttpResponse:
        return json(request, 400, {"error": str(exc), "kind": "invalid_id", "retryable": False})

    @api.exception_handler(ScriptError)
    def script(request: HttpRequest, exc: ScriptError) -> HttpResponse:
        status = 400
        msg = f"{exc.function} failed: {exc.code}" + (f" ({', '.join(exc.details)})" if exc.details else "")
        return json(request, status, {"error": msg, "kind": exc.code, "retryable": exc.retryable})

    @api.exception_handler(NotFound)
    def not_found(request: HttpRequest, exc: NotFound) -> HttpResponse:
        return json(request, 404, {"error": str(exc)})

    @api.exception_handler(RequestDataTooBig)
    def too_big(request: HttpRequest, exc: RequestDataTooBig) -> HttpResponse:
        return json(request, 413, {"error": "request body too large"})

    @api.exception_handler(HttpError)
    def http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
        status = exc.status_code
        msg = str(exc)
        if status == 400 and "parse" in msg.lower():
            msg = f"invalid JSON: {msg}"
        return json(request, status, {"error": msg})

    @api.exception_handler(redis.ConnectionError)
    def unavailable(request: HttpRequest, exc: redis.ConnectionError) -> HttpResponse:
        return json(request, 503, {"error": f"valkey: {exc}", "kind": "io_error", "retryable": True})

    @api.exception_handler(redis.TimeoutError)
    def timeout(request: HttpRequest, exc: redis.TimeoutError) -> HttpResponse:
        return json(request, 503, {"error": f"valkey: {exc}", "kind": "io_error", "retryable": True})

    @api.exception_handler(ValueError)
    def value_error(request: HttpRequest, exc: ValueError) -> HttpResponse:
        return json(request, 400, {"error": str(exc), "kind": "invalid_input", "retryable": False})
