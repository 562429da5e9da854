"""ffcore exceptions and framework errors mapped to HTTP once, as JSON `{error, kind?, retryable?}`."""

from __future__ import annotations

from typing import Any

import redis
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError

from ffcore.errors import ConfigError, FFError, InvalidId, LibraryError, ScriptError, ServerError
from ffcore.flows import PartitionMismatch
from ffcore.streams import ConcurrencyLimit

from .access import Denied


class NotFound(Exception):
    pass


class Busy(Exception):
    """A bounded pool is full (server.md §6.1 ConcurrencyLimitExceeded): 429, retry with backoff."""

    def __init__(self, pool: str, limit: int) -> None:
        super().__init__(f"too many concurrent {pool} calls (server max: {limit}); retry with backoff")


def _fields(errors: list[dict[str, Any]]) -> list[dict[str, str]]:
    out = []
    for e in errors:
        loc = [str(x) for x in e.get("loc", ())]
        if loc and loc[0] in ("body", "query", "path"):
            loc = loc[1:]  # where it came from
        if len(loc) > 1 and loc[0] in ("body", "payload", "q"):
            loc = loc[1:]  # the view's parameter name, not a field
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
        detail = f" ({', '.join(exc.details)})" if exc.details else ""
        msg = f"{exc.function} failed: {exc.code}{detail}" if exc.function else f"{exc.code}{detail}"
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

    @api.exception_handler(Busy)
    def busy(request: HttpRequest, exc: Busy) -> HttpResponse:
        return json(request, 429, {"error": str(exc), "kind": "concurrency_limit", "retryable": True})

    @api.exception_handler(ConcurrencyLimit)
    def stream_busy(request: HttpRequest, exc: ConcurrencyLimit) -> HttpResponse:
        return json(request, 429, {"error": str(exc), "kind": "concurrency_limit", "retryable": True})

    @api.exception_handler(PartitionMismatch)
    def mismatch(request: HttpRequest, exc: PartitionMismatch) -> HttpResponse:
        # Upstream answers 500 for this client mistake; a 400 says whose mistake it is (documented).
        return json(request, 400, {"error": f"partition mismatch: {exc}", "kind": "partition_mismatch",
                                   "retryable": False})

    @api.exception_handler(ConfigError)
    def config(request: HttpRequest, exc: ConfigError) -> HttpResponse:
        return json(request, 400, {"error": str(exc), "kind": "invalid_input", "retryable": False})

    @api.exception_handler(FFError)
    def conflict(request: HttpRequest, exc: FFError) -> HttpResponse:
        # e.g. "flow kept changing under us": a concurrent writer won every optimistic retry.
        return json(request, 409, {"error": str(exc), "kind": "conflict", "retryable": True})

    @api.exception_handler(ServerError)
    def server(request: HttpRequest, exc: ServerError) -> HttpResponse:
        return json(request, 503, {"error": f"valkey: {exc}", "kind": "io_error", "retryable": True})

    @api.exception_handler(LibraryError)
    def library(request: HttpRequest, exc: LibraryError) -> HttpResponse:
        return json(request, 500, {"error": f"library load: {exc}", "kind": "library_load", "retryable": False})

    @api.exception_handler(redis.ResponseError)
    def valkey_error(request: HttpRequest, exc: redis.ResponseError) -> HttpResponse:
        return json(request, 500, {"error": f"valkey: {exc}", "kind": "response_error", "retryable": False})

    @api.exception_handler(ValueError)
    def value_error(request: HttpRequest, exc: ValueError) -> HttpResponse:
        return json(request, 400, {"error": str(exc), "kind": "invalid_input", "retryable": False})
