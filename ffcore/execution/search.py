"""Find what an id names (issue #25, item 3): a bare UUID on any partition, or an id prefix among recent executions.

A bare UUID (what users copy from logs) carries no partition tag: one pipelined probe asks every flow
partition whether `{fp:N}:<uuid>` is an execution or `<uuid>` a waitpoint there, and the flow
partition the UUID hashes to whether it is a flow — 2 x partitions + 1 EXISTS/HGET in one round trip,
no keyspace scan. A prefix of at least `MIN_PREFIX` hex digits is matched against the newest
`RECENT_WINDOW` executions of the created indexes (a k-way merge that reads no execution record:
members are matched by their id alone).
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field

from ffcore.backend import Backend
from ffcore.errors import InvalidId
from ffcore.ids import ExecutionId
from ffcore.keys import ExecKeys, FlowKeys, PartitionKeys
from ffcore.partition import flow_partition
from ffcore.reads import text
from ffcore.upstream.reads import indexes

from .listing import merge_desc

#: Shortest id prefix searched (shorter ones match too much to be an id someone copied).
MIN_PREFIX = 8
#: Newest executions (across partitions) a prefix is matched against.
RECENT_WINDOW = 5000
#: Most prefix matches returned.
MAX_MATCHES = 50

_HEX_PREFIX = re.compile(r"^[0-9a-f-]+\Z")


@dataclass
class Found:
    """What a query named. `kind` is execution, flow, waitpoint, prefix, or "" (nothing)."""

    kind: str
    #: The execution id (execution, waitpoint), the flow id (flow), or "" (prefix, nothing).
    target: str = ""
    #: The waitpoint id when `kind` is waitpoint.
    waitpoint_id: str = ""
    #: Prefix matches, newest first.
    matches: list[str] = field(default_factory=list)
    #: Recent executions examined for a prefix (at most RECENT_WINDOW).
    examined: int = 0


def _bare_uuid(q: str) -> str | None:
    try:
        return str(uuid.UUID(q))
    except ValueError:
        return None


def probe_uuid(backend: Backend, value: str) -> Found:
    """Which execution, flow or waitpoint a bare UUID names (one pipeline over every partition)."""
    u = str(uuid.UUID(value))
    count = backend.settings.partitions.flow
    pipe = backend.client.pipeline(transaction=False)
    for n in range(count):
        pipe.exists(ExecKeys(f"{{fp:{n}}}:{u}").core)
        pipe.hget(PartitionKeys(n).waitpoint(u), "execution_id")
    pipe.exists(FlowKeys(flow_partition(u, count), u).core)
    replies = pipe.execute()
    for n in range(count):
        if replies[2 * n]:
            return Found("execution", f"{{fp:{n}}}:{u}")
    if replies[-1]:
        return Found("flow", u)
    for n in range(count):
        owner = replies[2 * n + 1]
        if owner:
            return Found("waitpoint", text(owner), waitpoint_id=u)
    return Found("")


def prefix_matches(backend: Backend, prefix: str, partitions: list[int] | None = None) -> Found:
    """Executions among the newest RECENT_WINDOW whose UUID starts with `prefix` (newest first)."""
    p = prefix.lower()
    parts = range(backend.settings.partitions.flow) if partitions is None else partitions
    created = indexes(backend).created
    keys = [created(n) for n in parts]

    def accept(eids: list[str]) -> list[bool]:
        return [e.rpartition(":")[2].startswith(p) for e in eids]

    found, examined, _ = merge_desc(backend, keys, None, MAX_MATCHES, accept, max_examined=RECENT_WINDOW)
    found.pop()  # the cursor
    return Found("prefix", matches=found, examined=examined)


def search(backend: Backend, query: str, partitions: list[int] | None = None) -> Found:
    """A full execution id, a bare UUID (execution, flow or waitpoint) or an id prefix of >= MIN_PREFIX hex digits.

    Raises InvalidId (with words for the person who typed it) for anything else.
    """
    q = query.strip()
    if not q:
        raise InvalidId("Type an execution, flow or waitpoint id, or at least 8 hex digits of one.")
    if q.startswith("{"):
        eid = ExecutionId(q)  # InvalidId names what is wrong
        exists = backend.client.exists(ExecKeys(eid).core)
        return Found("execution", str(eid)) if exists else Found("")
    u = _bare_uuid(q)
    if u is not None:
        return probe_uuid(backend, u)
    low = q.lower()
    if _HEX_PREFIX.match(low) and sum(c != "-" for c in low) >= MIN_PREFIX:
        return prefix_matches(backend, low, partitions)
    raise InvalidId(f"{q[:80]!r} is not an id: type an execution, flow or waitpoint id, "
                    f"or at least {MIN_PREFIX} hex digits of one.")
