"""RQ: `rq worker -u <url>` (the default forking worker) or `rq worker -w rq.worker.SimpleWorker -u <url>`,
two processes, the default queue."""

from __future__ import annotations

from benchmarks.recorder import mark


def noop(i: int) -> None:
    mark(i)
