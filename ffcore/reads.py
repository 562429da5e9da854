"""Pipelined reads of execution records (no keyspace scans), and the typed `describe_execution`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
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


# ---------------------------------------------------------------- describe_execution (operations §12.2)

#: The nil UUID: LeaseSummary.lease_id when the core names no lease id (operations §12.2).
NIL_UUID = "00000000-0000-0000-0000-000000000000"
_SNAPSHOT_FIELDS = ("execution_id", "flow_id", "lane_id", "namespace", "public_state", "blocking_reason",
                    "blocking_detail", "current_attempt_id", "current_attempt_index", "ownership_state",
                    "current_lease_id", "current_lease_epoch", "current_worker_instance_id", "lease_expires_at",
                    "lease_last_renewed_at", "current_waitpoint_id", "created_at", "last_mutation_at",
                    "total_attempt_count")


@dataclass(frozen=True)
class AttemptSummary:
    attempt_id: str
    attempt_index: int


@dataclass(frozen=True)
class LeaseSummary:
    """The lease a worker holds now (None on the snapshot once it is released, expired or revoked).
    `lease_id` is the nil UUID when the execution names no lease id; `last_heartbeat_at` is the last renewal.
    Served as is by the REST API (its OpenAPI schema is this class)."""

    lease_epoch: int
    worker_instance_id: str
    expires_at: int
    lease_id: str
    attempt_index: int
    #: The last renewal (None before the first one).
    last_heartbeat_at: int | None


@dataclass(frozen=True)
class ExecutionSnapshot:
    """describe_execution's model (operations §12.2): `current_lease` is null unless a worker holds the lease
    now; `current_waitpoint` is the waitpoint id the execution is suspended on now. Served as is by the REST API."""

    execution_id: str
    flow_id: str | None
    lane_id: str
    namespace: str
    public_state: str
    blocking_reason: str | None
    blocking_detail: str | None
    current_attempt: AttemptSummary | None
    current_lease: LeaseSummary | None
    #: The waitpoint the execution is suspended on now.
    current_waitpoint: str | None
    created_at: int
    last_mutation_at: int
    total_attempt_count: int
    tags: dict[str, str]


def _ms(v: str) -> int | None:
    return int(v) if v.lstrip("-").isdigit() else None


def describe_execution(backend: Backend, eid: str) -> ExecutionSnapshot | None:
    """One execution's typed read model (operations §12.2) in one round trip; None when it does not exist."""
    k = ExecKeys(eid)
    pipe = backend.client.pipeline(transaction=False)
    pipe.hmget(k.core, _SNAPSHOT_FIELDS)
    pipe.hgetall(k.tags)
    raw, tags = pipe.execute()
    c = dict(zip(_SNAPSHOT_FIELDS, map(text, raw), strict=True))
    if not c["execution_id"]:
        return None
    attempt_index = _ms(c["current_attempt_index"])
    attempt = (AttemptSummary(c["current_attempt_id"], attempt_index)
               if c["current_attempt_id"] and attempt_index is not None else None)
    lease = None
    if c["ownership_state"] == "leased" and c["current_worker_instance_id"]:
        lease = LeaseSummary(_ms(c["current_lease_epoch"]) or 0, c["current_worker_instance_id"],
                             _ms(c["lease_expires_at"]) or 0, c["current_lease_id"] or NIL_UUID,
                             attempt_index or 0, _ms(c["lease_last_renewed_at"]))
    return ExecutionSnapshot(
        c["execution_id"], c["flow_id"] or None, c["lane_id"], c["namespace"], c["public_state"],
        c["blocking_reason"] or None, c["blocking_detail"] or None, attempt, lease, c["current_waitpoint_id"] or None,
        _ms(c["created_at"]) or 0, _ms(c["last_mutation_at"]) or 0, _ms(c["total_attempt_count"]) or 0,
        decode_map(tags))
