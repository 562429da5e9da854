"""Handlers for the worker processes the tests start (`manage.py ffworker --module tests.worker_handlers`).

Side effects go to keys under the test-only prefix `fftest:` so tests can count how often a handler ran.
"""

from __future__ import annotations

import time
from typing import Any

from ffcore.worker.task import ClaimedTask
from ffcore.worker.worker import handler

#: Test-only key prefix; the engine never reads or writes these keys.
PREFIX = "fftest:"
#: How long a held task waits for its release key before giving up.
HOLD_MAX_S = 30.0


def handled_key(eid: str) -> str:
    """INCRed once each time a handler's work for `eid` runs to its end."""
    return f"{PREFIX}handled:{eid}"


def release_key(eid: str) -> str:
    """Set by a test to let a held task finish."""
    return f"{PREFIX}release:{eid}"


@handler("count")
def count(task: ClaimedTask) -> dict[str, Any]:
    """Record one run; an optional `sleep_ms` keeps the task in flight so workers overlap."""
    sleep_ms = (task.json() or {}).get("sleep_ms", 0)
    if sleep_ms:
        time.sleep(sleep_ms / 1000)
    task.backend.client.incr(handled_key(task.execution_id))
    return {"attempt": task.attempt_index}


@handler("hold")
def hold(task: ClaimedTask) -> dict[str, Any]:
    """Stay in flight until the test sets the release key (or the lease is lost), then record one run."""
    client = task.backend.client
    deadline = time.monotonic() + HOLD_MAX_S
    while not client.exists(release_key(task.execution_id)):
        if task.lease_lost.is_set() or time.monotonic() > deadline:
            raise RuntimeError("held task was never released")
        time.sleep(0.02)
    client.incr(handled_key(task.execution_id))
    return {"attempt": task.attempt_index, "attempt_type": task.attempt_type}


@handler("log_run")
def log_run(task: ClaimedTask) -> dict[str, Any]:
    """Append `execution_id attempt_index` to the file FFTEST_RUN_LOG names: a record of every run kept outside
    Valkey, so a failover that loses data cannot lose it (one short O_APPEND write per run stays whole)."""
    import os

    with open(os.environ["FFTEST_RUN_LOG"], "a") as f:
        f.write(f"{task.execution_id} {task.attempt_index}\n")
    return {"attempt": task.attempt_index}
