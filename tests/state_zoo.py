"""Executions in every public state, made through the engine's own operations (issue #25, the action matrix).

`build(backend, copies)` returns {public state: [execution ids]}, `copies` fresh executions per state, so a
test can apply one action to each without one action's effect reaching another's subject.
"""

from __future__ import annotations

import time

from ffcore import functions as F
from ffcore.backend import Backend
from ffcore.engine.flow_scanners import DependencyReconciler
from ffcore.engine.timeouts import ExecutionDeadlineScanner
from ffcore.execution.client import Client
from ffcore.flows.flows import Flows
from ffcore.keys import ExecKeys
from ffcore.policy import Policy
from ffcore.state import PublicState
from ffcore.suspension import hmac_secrets
from ffcore.worker.worker import Registry, Worker, WorkerConfig

STATES = tuple(s.value for s in PublicState)


def _claim(backend: Backend, lane: str, n: int) -> list:
    w = Worker(backend, WorkerConfig(lanes=(lane,), worker_instance_id=f"zoo-{lane}", concurrency=max(n, 1)),
               Registry())
    tasks = w.claim_next(n)
    assert len(tasks) == n, f"claimed {len(tasks)} of {n} on {lane}"
    return tasks


def build(backend: Backend, copies: int = 1) -> dict[str, list[str]]:
    c = Client(backend)
    flows = Flows(backend)
    hmac_secrets.install(backend, "cd" * 16)
    now = backend.now_ms()
    out: dict[str, list[str]] = {s: [] for s in STATES}

    def made(lane: str, **kw: object) -> str:
        return c.create(kind=f"zoo-{lane}", lane=lane, policy=Policy(), **kw).execution_id

    expiring = [made("zoo-expired", deadline_at=now + 60) for _ in range(copies)]
    for _ in range(copies):
        out["waiting"].append(made("zoo-waiting"))
        out["delayed"].append(made("zoo-delayed", delay_until=now + 3_600_000))
        eid = made("zoo-rate")
        backend.call(F.block_execution_for_admission(ExecKeys(eid), lane="zoo-rate", reason="waiting_for_budget",
                                                     detail="zoo budget", now_ms=backend.now_ms()))
        out["rate_limited"].append(eid)
        cancelled = made("zoo-cancelled")
        c.cancel(cancelled, reason="zoo")
        out["cancelled"].append(cancelled)
        fid = flows.create(kind="zoo")
        parent, child = flows.build(fid, [{"kind": "p", "lane": "zoo-parent"}, {"kind": "c", "lane": "zoo-child"}],
                                    [(0, 1)])
        out["waiting_children"].append(child)
        fid2 = flows.create(kind="zoo")
        _, skipped = flows.build(fid2, [{"kind": "p", "lane": "zoo-doomed"}, {"kind": "c", "lane": "zoo-child"}],
                                 [(0, 1)])
        out["skipped"].append(skipped)
    for lane, state in (("zoo-active", "active"), ("zoo-suspended", "suspended"), ("zoo-completed", "completed"),
                        ("zoo-failed", "failed")):
        for _ in range(copies):
            made(lane)
        tasks = _claim(backend, lane, copies)
        for t in tasks:
            if state == "suspended":
                t.suspend("approved", timeout_ms=3_600_000)
            elif state == "completed":
                t.complete(b"ok")
            elif state == "failed":
                t.fail("zoo failure", "zoo")
            out[state].append(t.execution_id)
    for t in _claim(backend, "zoo-doomed", copies):
        t.fail("upstream failure", "zoo")
    time.sleep(max(0, now + 80 - backend.now_ms()) / 1000)
    for scanner in (ExecutionDeadlineScanner(backend), DependencyReconciler(backend)):
        while scanner.tick():  # the deadline expires; the doomed parents' children are skipped
            pass
    out["expired"] = expiring
    for state, eids in out.items():
        got = [c.get_state(e) for e in eids]
        assert got == [state] * copies, (state, got)
    return out
