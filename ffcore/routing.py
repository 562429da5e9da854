"""Capability routing (ours): which eligible executions a worker's capabilities can run, found directly.

The contract routes by refusal: a worker lacking a required capability is refused the grant and blocks
the execution on route until the unblock scanner sees a capable worker alive — with many disjoint
capability sets an execution bounces between workers that cannot run it. So ffcore also indexes an
eligible execution that requires capabilities under its exact capability list (`LaneKeys.capable`,
registered per lane in `keys.lane_capsets`), at create and at route unblock. Workers claim from the
indexes of the lists their capabilities cover (`ff_claim_capable`), and the fast path leaves indexed
executions alone for workers that cannot run them. The index is a hint: claims prune it, stale
entries are dropped when met, and executions that re-enter eligible another way (retry, replay,
delay promotion) take the contract's route-block path, whose unblock indexes them again.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from typing import Any

from ffcore import keys
from ffcore.keys import PartitionKeys

#: The library's bounds on a required capability list (beyond them the create is refused).
MAX_TOKENS, MAX_BYTES = 256, 4096


def required_csv(policy_json: str) -> str:
    """The sorted csv the library stores as `required_capabilities` for this policy ('' = none/invalid)."""
    if not policy_json or policy_json == "{}":
        return ""
    try:
        data = json.loads(policy_json)
    except ValueError:
        return ""
    return required_csv_of(data)


def required_csv_of(data: Any) -> str:
    """`required_csv` of an already decoded policy."""
    rr = data.get("routing_requirements") if isinstance(data, dict) else None
    req = rr.get("required_capabilities") if isinstance(rr, dict) else None
    if not isinstance(req, list) or not req or len(req) > MAX_TOKENS:
        return ""
    if not all(isinstance(t, str) and t and "," not in t and not any(ord(ch) <= 32 or ord(ch) == 127 for ch in t)
               for t in req):
        return ""
    csv = ",".join(sorted(req))  # code-point order = the library's byte order for UTF-8
    return csv if len(csv.encode()) <= MAX_BYTES else ""


def eligible_score(priority: int, created_at_ms: int) -> int:
    """The library's eligible-set score: priority first, then FIFO."""
    return -priority * 1_000_000_000_000 + created_at_ms


class IndexBatch:
    """Capability-index entries gathered for one pipeline."""

    def __init__(self) -> None:
        self.entries: dict[tuple[int, str, str], dict[str, int]] = {}

    def add(self, partition: int, lane: str, caps_csv: str, eid: str, score: int) -> None:
        if caps_csv:
            self.entries.setdefault((partition, lane, caps_csv), {})[eid] = score

    def queue(self, pipe: Any) -> None:
        capsets: dict[str, set[str]] = {}
        for (n, lane, csv), members in self.entries.items():
            pipe.zadd(PartitionKeys(n).lane(lane).capable(csv), members)
            capsets.setdefault(lane, set()).add(csv)
        for lane, csvs in capsets.items():
            pipe.sadd(keys.lane_capsets(lane), *csvs)

    def drop(self, pipe: Any, eids: set[str]) -> None:
        for (n, lane, csv), members in self.entries.items():
            gone = [e for e in members if e in eids]
            if gone:
                pipe.zrem(PartitionKeys(n).lane(lane).capable(csv), *gone)


def runs(caps_csv: str, have: AbstractSet[str]) -> bool:
    """Whether a worker holding `have` holds every capability of the list `caps_csv`."""
    return set(caps_csv.split(",")) <= have


def covered(capsets: Iterable[str], have: Iterable[str]) -> list[str]:
    """The capability lists a worker holding `have` can run (sorted)."""
    mine = set(have)
    return sorted(cs for cs in capsets if cs and runs(cs, mine))
