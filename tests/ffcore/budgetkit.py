"""Small drivers shared by the budget and quota tests: attached executions and a claiming worker."""

from __future__ import annotations

from typing import Any

from ffcore.backend import Backend
from ffcore.budgets.budgets import budget_keys
from ffcore.budgets.quotas import quota_keys
from ffcore.execution.client import Client
from ffcore.ids import ExecutionId
from ffcore.policy import Policy
from ffcore.reads import text
from ffcore.worker.worker import Worker, WorkerConfig

from .invariants import check, core


def attached(backend: Backend, n: int = 1, *, budgets: tuple[str, ...] = (), quota: str | None = None,
             lane: str = "default", **kw: Any) -> list[ExecutionId]:
    policy = Policy(budget_ids=budgets, quota_policy_id=quota, **kw)
    out = [Client(backend).create(kind="job", lane=lane, policy=policy).execution_id for _ in range(n)]
    for eid in out:
        check(backend, eid)
    return out


def worker(backend: Backend, **kw: Any) -> Worker:
    kw.setdefault("lanes", ("default",))
    kw.setdefault("worker_id", "w-budget")
    return Worker(backend, WorkerConfig(**kw))


def in_flight(backend: Backend, quota_id: str) -> int:
    return int(text(backend.client.get(quota_keys(backend, quota_id).concurrency)) or 0)


def admitted(backend: Backend, quota_id: str) -> set[str]:
    return {text(x) for x in backend.client.smembers(quota_keys(backend, quota_id).admitted_set)}


def usage(backend: Backend, budget_id: str) -> dict[str, int]:
    raw = backend.client.hgetall(budget_keys(backend, budget_id).usage)
    return {text(k): int(v) for k, v in raw.items()}


def public_state(backend: Backend, eid: str) -> str:
    return check(backend, eid)["public_state"]


def blocking(backend: Backend, eid: str) -> tuple[str, str]:
    c = core(backend, eid)
    return c["blocking_reason"], c["blocking_detail"]
