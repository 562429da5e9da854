"""Pipelined reads of execution records (no keyspace scans)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .backend import Backend
from .functions import CoreRefs
from .keys import ExecKeys

_REF_FIELDS = ("lane_id", "current_attempt_index", "current_worker_instance_id", "current_waitpoint_id",
               "current_lease_id", "current_lease_epoch")


def text(v: Any) -> str:
    if v is None:
        return ""
    return v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else str(v)


def decode_map(raw: dict[Any, Any]) -> dict[str, str]:
    return {text(k): text(v) for k, v in raw.items()}


def core_refs_many(backend: Backend, eks: Sequence[ExecKeys]) -> list[CoreRefs]:
    """The KEYS-naming pointers of several executions in one round trip."""
    pipe = backend.client.pipeline(transaction=False)
    for k in eks:
        pipe.hmget(k.core, _REF_FIELDS)
    return [CoreRefs.from_core(dict(zip(_REF_FIELDS, map(text, vals), strict=True))) for vals in pipe.execute()]


def core_refs(backend: Backend, k: ExecKeys) -> CoreRefs:
    return core_refs_many(backend, [k])[0]


def read_core(backend: Backend, k: ExecKeys) -> dict[str, str]:
    return decode_map(backend.client.hgetall(k.core))
