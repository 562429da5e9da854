"""Helpers for the flow tests: real workers and the flow scanners running in threads."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ffcore.backend import Backend
from ffcore.engine.base import Scanner, run_scanners
from ffcore.engine.dag_listener import CompletionListener
from ffcore.engine.flow_scanners import DependencyReconciler
from ffcore.flows.flows import Flows
from ffcore.worker.worker import Registry, Worker, WorkerConfig
from tests.ffcore.workerkit import running

LANE = "flows"


@contextmanager
def scanners(backend: Backend, *extra: Scanner, listener: bool = True) -> Iterator[list[Scanner]]:
    """The completion listener (subscribed before we return) and the dependency reconciler."""
    stop = threading.Event()
    ss: list[Scanner] = [DependencyReconciler(backend, interval_ms=200, batch=200), *extra]
    lst = CompletionListener(backend, interval_ms=200) if listener else None
    if lst:
        ss.insert(0, lst)
    t = threading.Thread(target=run_scanners, args=(ss, stop), daemon=True)
    t.start()
    if lst:
        assert lst.ready.wait(5), "the completion listener did not subscribe"
    try:
        yield ss
    finally:
        stop.set()
        t.join(5)
        if lst:
            lst.close()


@contextmanager
def workers(backend: Backend, registry: Registry, n: int = 2, concurrency: int = 4) -> Iterator[list[Worker]]:
    ws = [Worker(backend, WorkerConfig(lanes=(LANE,), worker_id=f"flow-w{i}", concurrency=concurrency,
                                       poll_interval_ms=20), registry) for i in range(n)]
    with running(ws, listening=False):
        yield ws


def wait_until(cond: Callable[[], Any], timeout: float = 15.0, step: float = 0.02) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(step)
    raise AssertionError(f"condition not met within {timeout}s")


def states(flows: Flows, flow_id: str) -> dict[str, str]:
    g = flows.get(flow_id)
    assert g is not None
    return {n.eid: n.state for n in g.nodes}


def all_finished(flows: Flows, flow_id: str) -> dict[str, str] | None:
    s = states(flows, flow_id)
    terminal = {"completed", "failed", "cancelled", "expired", "skipped"}
    return s if all(v in terminal for v in s.values()) else None
