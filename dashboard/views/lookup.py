"""Ids from URL paths: a malformed one is a 404 naming what it is not (never a 500); a malformed `before`
paging cursor is a 400 naming the field."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from django.http import Http404, HttpRequest, HttpResponse

from ffcore.errors import InvalidId, InvalidInput
from ffcore.ids import ExecutionId, parse_flow_id
from ffcore.streams.streams import check_id

T = TypeVar("T")


def _or_404(parse: Callable[[str], T], value: str, what: str) -> T:
    try:
        return parse(value)
    except InvalidId:
        raise Http404(f"{value!r} is not {what}") from None


def execution_id(eid: str) -> ExecutionId:
    return _or_404(ExecutionId, eid, "an execution id")


def flow_id(value: str) -> str:
    return _or_404(parse_flow_id, value, "a flow id")


def before_cursor(request: HttpRequest) -> str | HttpResponse | None:
    """The `before` stream id a paged view starts from: None when absent, a 400 answer when malformed."""
    before = request.GET.get("before") or None
    if before is None:
        return None
    try:
        return check_id(before, "before")
    except InvalidInput:
        return HttpResponse("before must be a stream id like 1700000000000-0", status=400, content_type="text/plain")
