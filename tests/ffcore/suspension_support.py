"""Shared drivers for the suspension/signal tests: secrets installed, a claimed task, signal helpers."""

from __future__ import annotations

from typing import Any

from ffcore.backend import Backend
from ffcore.functions import Signal
from ffcore.ids import ExecutionId
from ffcore.keys import ExecKeys
from ffcore.reads import decode_map
from ffcore.suspension import hmac_secrets
from ffcore.suspension.signals import Signals
from ffcore.worker.task import ClaimedTask
from ffcore.worker.worker import Worker, WorkerConfig
from tests.ffcore.invariants import check, create

SECRET = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"


def with_secrets(backend: Backend) -> Backend:
    """The flushed backend with the waitpoint HMAC secret installed on every partition (fixture `hb`)."""
    hmac_secrets.install(backend, SECRET)
    return backend


def claimed(backend: Backend, **create_kw: Any) -> ClaimedTask:
    """Create an execution and claim it (fresh or resumed) with a worker that is not running a loop."""
    eid = create(backend, **create_kw)
    return claim_again(backend, eid)


def claim_again(backend: Backend, eid: str) -> ClaimedTask:
    lane = core(backend, eid).get("lane_id") or "default"
    w = Worker(backend, WorkerConfig(lanes=(lane,), worker_id="w", worker_instance_id="w-1"))
    for _ in range(3):
        for t in w.claim_next(8):
            if t.execution_id == eid:
                return t
    raise AssertionError(f"{eid} could not be claimed")


def signal(backend: Backend, eid: str, waitpoint_id: str, token: str, name: str, **kw: Any):
    return Signals(backend).deliver(eid, waitpoint_id, Signal(name, **kw), token)


def core(backend: Backend, eid: str) -> dict[str, str]:
    return decode_map(backend.client.hgetall(ExecKeys(eid).core))


def suspension(backend: Backend, eid: str) -> dict[str, str]:
    """The execution's current suspension record."""
    return decode_map(backend.client.hgetall(ExecKeys(eid).suspension_current))


def waitpoint(backend: Backend, eid: str, wid: str) -> dict[str, str]:
    return decode_map(backend.client.hgetall(ExecKeys(ExecutionId(eid)).idx.waitpoint(wid)))


__all__ = ["SECRET", "check", "claim_again", "claimed", "core", "signal", "suspension", "waitpoint", "with_secrets"]
