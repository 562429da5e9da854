"""A failed attempt's traceback, kept beside the attempt (a key of our own: the contract's failure_reason holds
one line). Deleted with the execution's other keys by the retention trimmer."""

from __future__ import annotations

import logging
import traceback

import redis

from ffcore.backend import Backend
from ffcore.keys import ExecKeys
from ffcore.reads import text

log = logging.getLogger("ffcore.execution.tracebacks")

#: Longest traceback kept, in bytes of UTF-8; the tail is kept (the raising frame and the error are last).
TRACEBACK_MAX_BYTES = 16 * 1024
#: Marks a traceback whose head was cut.
CUT_MARK = "…(earlier frames cut)…\n"
_HEAD = "Traceback (most recent call last):\n"


def format_exception(e: BaseException) -> str:
    """Python's own formatting of `e` (chained causes included), bounded: the first line is kept and the
    frames closest to the error win when it is too long."""
    full = "".join(traceback.format_exception(e))
    data = full.encode("utf-8", "replace")
    if len(data) <= TRACEBACK_MAX_BYTES:
        return full
    head = _HEAD if full.startswith(_HEAD) else ""
    room = TRACEBACK_MAX_BYTES - len(head.encode()) - len(CUT_MARK.encode())
    tail = data[-room:].decode("utf-8", "ignore")
    return head + CUT_MARK + tail


def store(backend: Backend, eid: str, attempt_index: int, e: BaseException) -> None:
    """Keep `e`'s traceback for the attempt; a Valkey failure here never stops the failure being recorded."""
    try:
        backend.client.set(ExecKeys(eid).attempt_traceback(attempt_index), format_exception(e))
    except redis.RedisError as err:
        log.warning("%s attempt %d: the traceback was not kept: %s", eid, attempt_index, err)


def read_many(backend: Backend, eid: str, attempt_indexes: list[int]) -> dict[int, str]:
    """Attempt index -> traceback, for the attempts that have one (one round trip)."""
    if not attempt_indexes:
        return {}
    k = ExecKeys(eid)
    got = backend.client.mget([k.attempt_traceback(i) for i in attempt_indexes])
    return {i: text(v) for i, v in zip(attempt_indexes, got, strict=True) if v is not None}
