"""Wake hints: tell idle workers of a lane, at once, which partitions just got eligible work.

Pub/Sub on `keys.lane_wake(lane)`; the message is the comma-separated partition indexes, followed for work that
needs capabilities by a space and their sorted list (lua/fastpath.lua): a worker lacking them ignores it. A hint only:
a lost message costs the worker its next poll, never correctness. Workers feed the partitions to their
claimer, so work on a partition their lane registry read has not seen yet is claimed on the first try.

A plain create or a signal wakes ONE worker instead (lua/fastpath.lua wake_one): the lane's idle set on the
partition (`LaneKeys.idle`, kept by the claims of workers that listen) names who has a free slot, and the
one idle longest gets "<lane> <partition>" on its own channel (`keys.worker_wake`); with nobody idle (or
nobody listening there) the lane channel wakes everyone, as before. A worker that takes hand-offs (its idle
member carries its lease parameters, `functions.idle_member`) is handed the lane's head instead: claimed for
it by the create and sent on its channel (`functions.parse_handoff`), one round trip per task fewer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ffcore import keys

from .backend import Backend

#: The last message on a worker's own channel, sent by its drain once it left the idle sets (ffcore.worker).
OWN_END = b"\x02"


def message(partitions: Iterable[int]) -> str:
    return ",".join(str(n) for n in sorted(set(partitions)))


def parse(data: Any) -> list[int]:
    return parse_hint(data)[0]


def parse_hint(data: Any) -> tuple[list[int], str]:
    """A lane channel's message: its partitions, and the capability list its work needs ("" = none)."""
    raw = data.decode() if isinstance(data, bytes) else str(data or "")
    parts, _, caps = raw.partition(" ")
    return [int(x) for x in parts.split(",") if x.isdigit()], caps


def parse_own(data: Any) -> dict[str, list[int]]:
    """A message on a worker's own channel (`keys.worker_wake`, written by lua/fastpath.lua): "<lane> <partition>"."""
    raw = data.decode() if isinstance(data, bytes) else str(data or "")
    lane, _, part = raw.partition(" ")
    return {lane: [int(part)]} if lane and part.isdigit() else {}


def announce(backend: Backend, work: Mapping[str, Iterable[int]], pipe: Any = None) -> None:
    """Publish one hint per lane; queued on `pipe` when given (standalone only), else sent now.

    redis-py refuses PUBLISH inside a cluster pipeline, so on a cluster the hints go out one by one.
    """
    if not work:
        return
    if pipe is not None and not backend.is_cluster:
        for lane, parts in work.items():
            pipe.publish(keys.lane_wake(lane), message(parts))
        return
    for lane, parts in work.items():
        backend.client.publish(keys.lane_wake(lane), message(parts))
