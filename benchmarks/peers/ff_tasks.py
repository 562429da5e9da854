"""Ours: `python manage.py ffworker --module benchmarks.peers.ff_tasks --lanes bench --concurrency 64`, two
processes (FF_VALKEY_URL names the server)."""

from __future__ import annotations

from benchmarks.recorder import mark
from ffcore.worker.task import ClaimedTask
from ffcore.worker.worker import handler


@handler("bench")
def noop(task: ClaimedTask) -> None:
    mark(int(task.payload))
