"""Client listing by partition/lane/state with cursors; the asyncio flavour of handlers and workers."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from ffcore.errors import InvalidInput
from ffcore.execution.client import Client
from ffcore.partition import lane_partition
from ffcore.worker.worker import Registry, Worker, WorkerConfig
from tests.bounded import arun
from tests.ffcore.invariants import check


def test_list_executions_pages_one_lane_index_with_a_cursor(backend):
    c = Client(backend)
    eids = [c.create(kind="k", lane="pages", priority=p % 3).execution_id for p in range(25)]
    part = lane_partition("pages")
    seen: list[str] = []
    cursor = None
    while True:
        page = c.list_executions(part, "pages", "waiting", cursor=cursor, limit=7)
        assert len(page.rows) <= 7
        seen += [r.execution_id for r in page.rows]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert sorted(seen) == sorted(eids) and len(seen) == len(set(seen))
    # Eligible order: higher priority first.
    prios = [int(c.get_execution(e, with_attempts=False)["priority"]) for e in seen]
    assert prios == sorted(prios, reverse=True)


def test_list_executions_by_terminal_state_and_bad_input(backend):
    c = Client(backend)
    eid = c.create(kind="k", lane="term").execution_id
    c.cancel(eid, reason="x")
    page = c.list_executions(lane_partition("term"), "term", "cancelled")
    assert [r.execution_id for r in page.rows] == [eid]
    assert page.rows[0].fields["public_state"] == "cancelled"
    with pytest.raises(InvalidInput):
        c.list_executions(0, "term", "waiting", cursor="garbage")
    with pytest.raises(InvalidInput):
        c.list_executions(0, "term", "waiting", limit=0)


def test_an_async_handler_runs_and_completes(backend):
    reg = Registry()

    @reg.handler("async-job")
    async def job(task):
        await asyncio.sleep(0.01)
        await task.aupdate_progress(50, "half")
        return {"echo": task.json()}

    c = Client(backend)
    eid = c.create(kind="async-job", payload=b'{"a": 1}').execution_id
    w = Worker(backend, WorkerConfig(concurrency=2, poll_interval_ms=20), reg)
    t = threading.Thread(target=w.run, kwargs={"install_signal_handlers": False})
    t.start()
    try:
        deadline = time.monotonic() + 10
        while c.get_state(eid) != "completed" and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        w.stop()
        t.join(timeout=10)
    assert c.get_state(eid) == "completed"
    assert c.get_result(eid) == b'{"echo":{"a":1}}'
    assert c.get_execution(eid)["progress_message"] == "half"
    check(backend, eid)


def test_arun_runs_the_worker_inside_an_event_loop_until_stopped(backend):
    reg = Registry()
    reg.handler("k")(lambda task: b"done")
    c = Client(backend)
    eid = c.create(kind="k").execution_id
    w = Worker(backend, WorkerConfig(poll_interval_ms=20), reg)

    async def main() -> str | None:
        runner = asyncio.create_task(w.arun())
        for _ in range(500):
            if c.get_state(eid) == "completed":
                break
            await asyncio.sleep(0.02)
        w.stop()
        await asyncio.wait_for(runner, 10)
        return c.get_state(eid)

    assert arun(main(), 30) == "completed"
    assert w.in_flight == {}
