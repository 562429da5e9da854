"""A demo-like workload in the test process: the `up --demo` generator (faster) and a worker running its handlers."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from ffcore.backend import Backend
from ffcore.worker.worker import Worker, WorkerConfig, registry
from tests.ffcore.workerkit import running


@contextmanager
def demo_load(backend: Backend, interval_s: float = 0.5) -> Iterator[None]:
    """Creates executions and flows every `interval_s` (4x the demo's pace) while a worker runs them."""
    from dashboard.demo import (
        handlers,  # noqa: F401 - registers the demo handlers
        workload,
    )
    from dashboard.demo.ids import LANES

    stop = threading.Event()
    gen = threading.Thread(target=workload.run, args=(backend, stop, interval_s), daemon=True)
    worker = Worker(backend, WorkerConfig(lanes=LANES, worker_instance_id="w-demo", concurrency=6), registry)
    gen.start()
    try:
        with running([worker]):
            yield
    finally:
        stop.set()
        gen.join(10)
