"""Attempt streams and live events on the local 3-primary cluster: appends, reads and blocking tails on
every primary, the live hub's relay (asyncio cluster pub/sub) and its tailer, and the retention trimmer
deleting an execution's keys."""

from __future__ import annotations

import asyncio
import threading

from ffcore import events
from ffcore.backend import Backend
from ffcore.engine.stream_scanners import RetentionTrimmer
from ffcore.execution.client import Client
from ffcore.keys import ExecKeys
from ffcore.streams import streams
from ffcore.streams import tail as stream_tail
from ffcore.worker.task import ClaimedTask
from ffcore.worker.worker import Registry, Worker, WorkerConfig
from tests.bounded import arun
from tests.ffcore.invariants import check

LANES = tuple(f"st-{i}" for i in range(6))


def _tasks(backend: Backend) -> list[ClaimedTask]:
    Client(backend).create_many([{"kind": "job", "lane": lane} for lane in LANES])
    w = Worker(backend, WorkerConfig(lanes=LANES, concurrency=16, worker_instance_id="w-st"), Registry())
    got = [t for _ in range(4) for t in w.claim_next(16)]
    assert len(got) == len(LANES) and len({t.execution_id.partition_index for t in got}) > 3
    return got


def test_frames_are_appended_read_and_tailed_on_every_primary(cbackend: Backend):
    tasks = _tasks(cbackend)
    pool = streams.StreamPool(cbackend, max_concurrent=4)
    try:
        for t in tasks:
            first = t.append_frame("log", "a").stream_id
            threading.Timer(0.1, lambda t=t: t.append_frame("log", "b")).start()
            got = pool.tail(t.execution_id, 0, first, block_ms=5_000)
            assert [f.payload for f in got.frames] == [b"b"] and not got.closed
            t.complete(b"ok")
            read = streams.read_latest(cbackend, t.execution_id, 0, 10)
            assert [f.payload for f in read.frames] == [b"a", b"b"] and read.closed_reason == "attempt_success"
    finally:
        pool.close()


def test_the_live_relay_and_tailer_work_through_the_async_cluster_client(cbackend: Backend):
    (task, *_) = _tasks(cbackend)
    eid = task.execution_id

    async def run() -> tuple[list[events.Change], list[bytes], str]:
        aclient = stream_tail.async_client(cbackend.url)
        conn = stream_tail.async_client(cbackend.url)
        ready = asyncio.Event()
        changes: list[events.Change] = []

        async def relay() -> None:
            async for ch in events.listen(aclient, ready=ready):
                changes.append(ch)
                if str(eid) in ch.ids:
                    return

        listening = asyncio.ensure_future(relay())
        await asyncio.wait_for(ready.wait(), 5)
        lock = stream_tail.TailLock(aclient, eid, 0)
        assert await lock.acquire()

        def write() -> None:
            for n in range(3):
                task.append_frame("log", str(n))
            task.complete(b"ok")  # publishes the change the relay waits for

        threading.Timer(0.1, write).start()
        seen: list[bytes] = []
        reason = ""
        async for batch in stream_tail.follow(aclient, conn, eid, 0, "0-0", block_ms=200):
            seen += [f.payload for f in batch.frames]
            reason = batch.closed_reason
        await asyncio.wait_for(listening, 5)
        await lock.release()
        await aclient.aclose()
        await conn.aclose()
        return changes, seen, reason

    changes, seen, reason = arun(asyncio.wait_for(run(), 20))
    assert seen == [b"0", b"1", b"2"] and reason == "attempt_success"
    assert any(str(eid) in ch.ids for ch in changes)


def test_the_trimmer_deletes_every_key_of_an_expired_execution(cbackend: Backend):
    old, fresh, *_ = _tasks(cbackend)
    old.append_frame("log", "x")
    old.complete(b"r")
    fresh.complete(b"r")
    k = old.keys
    cbackend.client.zadd(k.lane(old.lane).terminal, {old.execution_id: cbackend.now_ms() - 2 * 86_400_000})
    assert RetentionTrimmer(cbackend).tick() == 1
    assert not any(cbackend.client.exists(key) for key in (k.core, k.policy, k.stream(0), k.attempt(0)))
    assert not cbackend.client.sismember(ExecKeys(old.execution_id).idx.all_executions, old.execution_id)
    assert check(cbackend, fresh.execution_id)["public_state"] == "completed"
