"""ffcore exceptions and framework errors mapped to HTTP once, as JSON `{error, kind?, retryable?}`."""

from __future__ import annotations

from typing import Any

import redis
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError

from ffcore.errors import (
    BudgetNotFound,
    ConfigError,
    FFError,
    InvalidId,
    LibraryError,
    ReplicationTimeout,
    ScriptError,
    ServerError,
)
from ffcore.flows.flows import PartitionMismatch
from ffcore.streams.streams import ConcurrencyLimit
from ffcore.upstream import NotOnUpstream

from ..valkey_errors import refusal
from .access import Denied


class NotFound(Exception):
    pass


class RotationTimeout(Exception):
    """The rotate call ran past its cap (504); Valkey-side work may still finish."""


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


#: Exceptions answered by a fixed mapping: class -> (status, kind, retryable, message prefix). `kind` and
#: `retryable` are left out of the body when None. Upstream answers 500 for a partition mismatch; a 400
#: says whose mistake it is (documented). FFError left over is e.g. "flow kept changing under us": a
#: concurrent writer won every optimistic retry.
_MAPPED: dict[type[Exception], tuple[int, str | None, bool | None, str]] = {
    InvalidId: (400, "invalid_id", False, ""),
    NotFound: (404, None, None, ""),
    BudgetNotFound: (404, "budget_not_found", False, ""),
    RotationTimeout: (504, "timeout", True, ""),
    redis.ConnectionError: (503, "io_error", True, "valkey: "),
    redis.TimeoutError: (503, "io_error", True, "valkey: "),
    ServerError: (503, "io_error", True, "valkey: "),
    # FF_DURABILITY=replicated: applied on the primary, not confirmed by its replicas (may not survive).
    ReplicationTimeout: (503, "replication_timeout", True, "valkey: "),
    Busy: (429, "concurrency_limit", True, ""),
    ConcurrencyLimit: (429, "concurrency_limit", True, ""),
    PartitionMismatch: (400, "partition_mismatch", False, "partition mismatch: "),
    ConfigError: (400, "invalid_input", False, ""),
    ValueError: (400, "invalid_input", False, ""),
    FFError: (409, "conflict", True, ""),
    LibraryError: (500, "library_load", False, "library load: "),
}


def install(api: NinjaAPI) -> None:
    def json(request: HttpRequest, status: int, body: dict[str, Any]) -> HttpResponse:
        return api.create_response(request, body, status=status)

    def mapped(request: HttpRequest, exc: Any) -> HttpResponse:
        for cls in type(exc).__mro__:  # the most specific mapping, as ninja picks handlers
            if cls in _MAPPED:
                status, kind, retryable, prefix = _MAPPED[cls]
                break
        body: dict[str, Any] = {"error": f"{prefix}{exc}"}
        if kind is not None:
            body["kind"] = kind
        if retryable is not None:
            body["retryable"] = retryable
        return json(request, status, body)

    for cls in _MAPPED:
        api.add_exception_handler(cls, mapped)

    @api.exception_handler(NotOnUpstream)
    def not_on_upstream(request: HttpRequest, exc: NotOnUpstream) -> HttpResponse:
        # A feature only our library has, asked of an upstream deployment: nothing was written.
        return json(request, 409, {"error": str(exc), "kind": "not_on_upstream", "retryable": False,
                                   "upstream_version": exc.release})

    @api.exception_handler(redis.ResponseError)
    def refused(request: HttpRequest, exc: redis.ResponseError) -> HttpResponse:
        status, message = refusal(request, exc)  # never Valkey's own text: it names internals
        return json(request, status, {"error": message, "kind": "response_error", "retryable": False})

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

    @api.exception_handler(ScriptError)
    def script(request: HttpRequest, exc: ScriptError) -> HttpResponse:
        detail = f" ({', '.join(exc.details)})" if exc.details else ""
        msg = f"{exc.function} failed: {exc.code}{detail}" if exc.function else f"{exc.code}{detail}"
        return json(request, 400, {"error": msg, "kind": exc.code, "retryable": exc.retryable})

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
