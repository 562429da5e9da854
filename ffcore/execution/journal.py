"""The execution journal (a stream of our own) and the renewal tally: the few facts of an execution's History
that the contract's records do not keep (progress, spend, retry backoff, operator actions, renewals).

Writes are best-effort side notes: a failed note never fails the operation it describes. Both keys go away
with the execution (the retention trimmer deletes them with its other keys)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Mapping

import redis

from ..backend import Backend
from ..errors import InvalidId
from ..ids import ExecutionId
from ..keys import ExecKeys

log = logging.getLogger("ffcore.execution.journal")

#: Entries kept per execution (approximate trim): plenty for a page of history, bounded memory.
JOURNAL_MAXLEN = 500
#: Longest field value kept (reasons, messages).
VALUE_MAX = 500


def note(backend: Backend, eid: str | ExecutionId, event: str, **fields: str | int) -> None:
    """Append one entry (`event` plus string fields) to the execution's journal."""
    note_many(backend, [(str(eid), event, {k: str(v) for k, v in fields.items()})])


def note_many(backend: Backend, notes: Iterable[tuple[str, str, Mapping[str, str]]]) -> None:
    """(execution id, event, fields) notes in one pipeline."""
    pipe = backend.client.pipeline(transaction=False)
    n = 0
    for eid, event, fields in notes:
        entry = {"event": event, **{k: str(v)[:VALUE_MAX] for k, v in fields.items()}}
        pipe.xadd(ExecKeys(eid).journal, entry, maxlen=JOURNAL_MAXLEN, approximate=True)
        n += 1
    if n:
        with contextlib.suppress(redis.RedisError):
            pipe.execute()


def execution_target(target: str) -> ExecutionId | None:
    """The execution an audit target names, if it names one."""
    try:
        return ExecutionId(target)
    except (InvalidId, TypeError):  # any other target (a flow, a budget, a job…)
        return None


def tally_renewals(backend: Backend, renewed: Iterable[tuple[str, int, int]]) -> None:
    """Count successful renewals: (execution id, attempt index, server time ms) triples, one pipeline."""
    pipe = backend.client.pipeline(transaction=False)
    n = 0
    for eid, i, at in renewed:
        k = ExecKeys(eid).renewals
        pipe.hincrby(k, f"{i}:n", 1)
        pipe.hsetnx(k, f"{i}:first", at)
        pipe.hset(k, f"{i}:last", at)
        n += 1
    if n:
        try:
            pipe.execute()
        except redis.RedisError as e:  # a lost tally only blurs the History
            log.debug("renewal tally lost: %s", e)
