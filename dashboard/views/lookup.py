"""Ids from URL paths: a malformed one is a 404 naming what it is not (never a 500)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from django.http import Http404

from ffcore.errors import InvalidId
from ffcore.ids import ExecutionId, parse_flow_id

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
