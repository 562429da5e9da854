"""Our per-kind and per-tag newest-first listing indexes (`PartitionKeys.kind_created` / `tag_created`).

They mirror `PartitionKeys.created` (eid -> created_at ms) for one kind or one tag pair, so a kind or tag filter
reads only matching executions instead of post-filtering the whole created index. Written beside `created` at
every ffcore create path and at tag writes; trimmed where an execution is deleted (retention). Outside the
contract's functions, so not atomic with them: readers still check each row's fields, so a stale entry (a tag
overwritten while this ran) is skipped, never shown.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ffcore import functions as F
from ffcore.ids import ExecutionId
from ffcore.keys import PartitionKeys


def index_keys(eid: ExecutionId | str, kind: str, tags: Mapping[str, str]) -> list[str]:
    ix = PartitionKeys(ExecutionId(str(eid)).partition_index)
    return ([ix.kind_created(kind)] if kind else []) + [ix.tag_created(k, v) for k, v in tags.items()]


def add(pipe: Any, eid: ExecutionId | str, created_ms: int, kind: str, tags: Mapping[str, str]) -> None:
    """Queue the index entries of a created execution on `pipe` (a pipeline; no reply to check)."""
    for key in index_keys(eid, kind, tags):
        pipe.zadd(key, {str(eid): created_ms})


def drop(pipe: Any, eid: ExecutionId | str, kind: str, tags: Mapping[str, str]) -> None:
    for key in index_keys(eid, kind, tags):
        pipe.zrem(key, str(eid))


def create_tags(call: F.Call) -> dict[str, str]:
    """The tags an `ff_create_execution` call carries (its ARGV tags JSON)."""
    raw = call.args[10]
    return {str(k): str(v) for k, v in json.loads(raw).items()} if isinstance(raw, str) and raw != "{}" else {}
