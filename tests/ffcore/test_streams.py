"""Attempt streams: fenced appends, limits, range reads, the blocking tail with its close marker, the
asyncio follower, state-change events and the retention trimmer."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest

from ffcore import events
from ffcore import functions as F
from ffcore.engine.stream_scanners import RetentionTrimmer
from ffcore.errors import InvalidInput
from ffcore.execution.client import Client
from ffcore.keys import ExecKeys
from ffcore.reads import decode_map
from ffcore.streams import streams
from ffcore.streams import tail as stream_tail
from ffcore.worker.worker import Registry, Worker, WorkerConfig
from tests.bounded import arun, join

from .invariants import check, raises, reclaim


def _task(backend, lease_ttl_ms=30_000, **kw):
    Client(backend).create(kind="job", **kw)
    (task,) = Worker(backend, WorkerConfig(worker_instance_id="w-st", lease_ttl_ms=lease_ttl_ms),
                     Registry()).claim_next(1)
    return task


def _meta(backend, task):
    return decode_map(backend.client.hgetall(task.keys.stream_meta(task.attempt_index)))


# ------------------------------------------------------------------ appends
def test_a_lease_holder_appends_frames_in_order_with_lifetime_counts(backend):
    task = _task(backend)
    a = task.append_frame("log", "hello")
    b = task.append_frame("token", b"\x00\xff", metadata="corr-1")
    assert (a.frame_count, b.frame_count) == (1, 2)
    assert streams.id_key(a.stream_id) < streams.id_key(b.stream_id)
    got = streams.read_stream(backend, task.execution_id, task.attempt_index)
    assert [(f.frame_type, f.payload, f.correlation_id, f.source) for f in got.frames] == [
        ("log", b"hello", "", "worker"), ("token", b"\x00\xff", "corr-1", "worker")]
    assert not got.closed
    meta = _meta(backend, task)
    assert meta["frame_count"] == "2" and meta["total_bytes"] == "7" and meta["last_sequence"] == b.stream_id
    check(backend, task.execution_id)


def test_an_oversized_frame_is_refused_before_anything_is_written(backend):
    task = _task(backend)
    raises("retention_limit_exceeded", lambda: task.append_frame("log", b"x" * 65_537))
    assert backend.client.exists(task.keys.stream(0), task.keys.stream_meta(0)) == 0
    assert task.is_lease_healthy  # a too-large frame says nothing about the lease
    assert task.append_frame("log", b"x" * 65_536).frame_count == 1


def test_a_stale_owner_cannot_append_after_a_reclaim(backend):
    task = _task(backend, lease_ttl_ms=200)
    task.append_frame("log", "mine")
    time.sleep(0.25)
    backend.call(F.mark_lease_expired_if_due(task.keys))
    reclaim(backend, task.execution_id)
    raises("stale_owner_cannot_append", lambda: task.append_frame("log", "late"))
    assert task.lease_lost.is_set()
    old = streams.read_latest(backend, task.execution_id, 0, 10)
    assert [f.payload for f in old.frames] == [b"mine"] and old.closed_reason == "reclaimed"


def test_the_stream_closes_when_the_attempt_completes(backend):
    task = _task(backend)
    task.append_frame("log", "one")
    fence, keys = task.fence, task.keys
    task.complete("done")
    err = raises("stream_closed", lambda: backend.call(F.append_frame(keys, fence, frame_type="log", payload=b"x")))
    assert err.code == "stream_closed"
    got = streams.read_stream(backend, task.execution_id, 0)
    assert got.closed and got.closed_reason == "attempt_success" and len(got.frames) == 1


def test_an_exact_retention_cap_keeps_only_the_newest_frames(backend):
    task = _task(backend)
    for n in range(8):
        backend.call(F.append_frame(task.keys, task.fence, frame_type="log", payload=str(n).encode(),
                                    retention_maxlen=5))
    got = streams.read_stream(backend, task.execution_id, 0)
    assert [f.payload for f in got.frames] == [b"3", b"4", b"5", b"6", b"7"]
    assert _meta(backend, task)["frame_count"] == "8"  # lifetime appends, not kept entries


# ------------------------------------------------------------------ reads
def test_range_reads_honour_bounds_exclusive_starts_and_counts(backend):
    task = _task(backend)
    ids = [task.append_frame("log", str(n)).stream_id for n in range(6)]
    eid = task.execution_id
    assert [f.id for f in streams.read_stream(backend, eid, 0, ids[1], ids[3]).frames] == ids[1:4]
    assert [f.id for f in streams.read_stream(backend, eid, 0, f"({ids[1]}", "+", 2).frames] == ids[2:4]
    assert [f.id for f in streams.read_latest(backend, eid, 0, 2).frames] == ids[4:]
    assert [f.id for f in streams.read_latest(backend, eid, 0, 2, before=ids[4]).frames] == ids[2:4]
    for bad in (0, 10_001):
        with pytest.raises(InvalidInput):
            streams.read_stream(backend, eid, 0, count_limit=bad)
    raw = raises("invalid_input", lambda: backend.call(F.read_attempt_stream(ExecKeys(eid), 0, count_limit=10_001)))
    assert raw.details == ["count_limit_exceeds_hard_cap"]


def test_an_attempt_that_never_wrote_reads_as_closed_once_it_ends(backend):
    task = _task(backend)
    assert not streams.read_latest(backend, task.execution_id, 0, 5).closed
    task.fail("boom")
    got = streams.read_latest(backend, task.execution_id, 0, 5)
    assert got.frames == [] and got.closed_reason == "attempt_failure"
    assert streams.read_latest(backend, task.execution_id, 7, 5).closed_reason == "no_such_attempt"


# ------------------------------------------------------------------ blocking tail
def test_a_blocking_tail_wakes_on_a_new_frame_and_reports_the_close(backend):
    task = _task(backend)
    first = task.append_frame("log", "a").stream_id
    ops = streams.StreamPool(backend, max_concurrent=2)
    threading.Timer(0.15, lambda: task.append_frame("log", "b")).start()
    started = time.monotonic()
    got = ops.tail(task.execution_id, 0, first, block_ms=5_000)
    assert [f.payload for f in got.frames] == [b"b"] and not got.closed
    assert time.monotonic() - started < 4.5  # woke by the frame, before block_ms (5 s) ran out
    empty = ops.tail(task.execution_id, 0, got.frames[-1].id, block_ms=100)
    assert empty.frames == [] and not empty.closed  # a timeout: still open
    task.complete()
    closed = ops.tail(task.execution_id, 0, got.frames[-1].id, block_ms=0)
    assert closed.closed and closed.closed_reason == "attempt_success"
    with pytest.raises(InvalidInput):
        ops.tail(task.execution_id, 0, "0-0", block_ms=30_001)
    ops.close()


def test_stream_ops_refuse_at_once_when_every_permit_is_taken(backend):
    task = _task(backend)
    ops = streams.StreamPool(backend, max_concurrent=1)
    holder = threading.Thread(target=lambda: ops.tail(task.execution_id, 0, "0-0", block_ms=800), daemon=True)
    holder.start()
    time.sleep(0.2)
    with pytest.raises(streams.ConcurrencyLimit):
        ops.read(task.execution_id, 0)
    join(holder)
    assert ops.read(task.execution_id, 0).frames == []
    ops.close()


def test_the_async_follower_yields_every_frame_then_the_close_marker(backend):
    task = _task(backend)
    eid = task.execution_id

    def writer():
        for n in range(5):
            task.append_frame("log", str(n))
        task.complete()

    async def run():
        aclient = stream_tail.async_client(backend.url)
        conn = stream_tail.async_client(backend.url)
        threading.Timer(0.1, writer).start()
        seen, last = [], None
        async for batch in stream_tail.follow(aclient, conn, eid, 0, "0-0", block_ms=200):
            seen += [f.payload for f in batch.frames]
            last = batch
        await aclient.aclose()
        await conn.aclose()
        return seen, last

    seen, last = arun(asyncio.wait_for(run(), 10))
    assert seen == [b"0", b"1", b"2", b"3", b"4"]
    assert last.closed_reason == "attempt_success"


def test_only_one_tailer_holds_a_stream_lock(backend):
    async def run():
        aclient = stream_tail.async_client(backend.url)
        eid = Client(backend).create(kind="job").execution_id
        a, b = stream_tail.TailLock(aclient, eid, 0), stream_tail.TailLock(aclient, eid, 0)
        got = (await a.acquire(), await b.acquire(), await b.renew(), await a.renew())
        await b.release()  # not ours: keeps a's lock
        still = await aclient.exists(a.key)
        await a.release()
        gone = await aclient.exists(a.key)
        await aclient.aclose()
        return got, still, gone

    assert arun(run()) == ((True, False, False, True), 1, 0)


# ------------------------------------------------------------------ events
def test_state_changes_are_published_as_merged_events(backend):
    async def run():
        aclient = stream_tail.async_client(backend.url)
        ready = asyncio.Event()
        got: list[events.Change] = []

        async def consume():
            async for ch in events.listen(aclient, ready=ready):
                got.append(ch)
                if ch.created and ch.ids:
                    return

        task = asyncio.ensure_future(consume())
        await ready.wait()
        await asyncio.to_thread(lambda: Client(backend).create_many([{"kind": "a"}, {"kind": "a"},
                                                                       {"kind": "b", "lane": "gpu"}]))
        await asyncio.wait_for(task, 5)
        await aclient.aclose()
        return got

    merged = events.Change()
    for ch in arun(run()):
        merged.merge(ch)
    # (an earlier test's buffered event may arrive too: count only ours)
    assert merged.created["default"]["a"] == 2 and merged.created["gpu"] == {"b": 1} and len(merged.ids) >= 3


def test_a_dag_completion_message_reads_as_a_change(backend):
    ch = events.parse("ff:dag:completions", json.dumps({"execution_id": "e1", "flow_id": "f1", "outcome": "success"}))
    assert ch is not None and ch.ids == {"e1"} and ch.flows == {"f1"}
    assert events.parse("ff:events", b"not json") is None


# ------------------------------------------------------------------ retention trimmer
def test_the_trimmer_deletes_executions_past_retention_and_keeps_the_rest(backend):
    old = _task(backend)
    old.append_frame("log", "x")
    old.complete("r")
    short = _task(backend, policy=None)
    backend.client.set(short.keys.policy, json.dumps({"stream_policy": {"retention_ttl_ms": 1}}))
    short.complete()
    fresh = _task(backend)
    fresh.complete()
    k = old.keys
    # Age `old`: it finished two days ago as far as its terminal index knows.
    backend.client.zadd(k.lane("default").terminal, {old.execution_id: backend.now_ms() - 2 * 86_400_000})
    backend.client.zadd(short.keys.lane("default").terminal, {short.execution_id: backend.now_ms() - 120_000})
    trimmer = RetentionTrimmer(backend)
    assert trimmer.tick() == 2
    for gone in (old, short):
        leftover = list(backend.client.scan_iter(match=f"*{gone.execution_id}*"))
        assert leftover == []
        assert not backend.client.sismember(gone.keys.idx.all_executions, gone.execution_id)
    assert check(backend, fresh.execution_id)["public_state"] == "completed"
    assert trimmer.tick() == 0


def test_a_frame_keeps_its_encoding_source_and_metadata(backend):
    """Issue #24 item 11, #39 item 7: AppendFrameArgs' encoding, source, metadata_json and correlation_id reach the
    stored frame — metadata_json in a field of its own, so both can be given."""
    t = _task(backend)
    t.append_frame("tool", b'{"x": 1}', encoding="json", source="tool-runner", metadata_json='{"step": 3}',
                   correlation_id="req-6")
    t.append_frame("log", "plain", correlation_id="req-7")
    t.append_frame("log", "legacy", "req-8")  # upstream's positional metadata: the correlation id
    frames = streams.read_stream(backend, t.execution_id, t.attempt_index).frames
    assert [(f.encoding, f.source, f.correlation_id, f.metadata_json) for f in frames] == [
        ("json", "tool-runner", "req-6", '{"step": 3}'), ("utf8", "worker", "req-7", ""),
        ("utf8", "worker", "req-8", "")]


def test_max_payload_bytes_sets_the_frame_size_cap_both_ways(backend):
    t = _task(backend)
    raises("retention_limit_exceeded", lambda: t.append_frame("log", b"x" * 11, max_payload_bytes=10))
    assert t.append_frame("log", b"x" * 10, max_payload_bytes=10).frame_count == 1
    assert t.append_frame("log", b"x" * 70_000, max_payload_bytes=100_000).frame_count == 2  # over the default 64 KiB
    frames = streams.read_stream(backend, t.execution_id, t.attempt_index).frames
    assert [len(f.payload) for f in frames] == [10, 70_000]


def test_a_call_of_v0_2_0s_shape_stores_no_metadata_field(backend):
    t = _task(backend)
    call = F.append_frame(t.keys, t.fence, frame_type="log", payload=b"p", correlation_id="c")
    assert len(call.args) == 13  # v0.2.0's ARGV: the trailing metadata slot is sent only when given
    backend.call(call)
    (entry,) = backend.client.xrange(t.keys.stream(t.attempt_index))
    assert set(entry[1]) == {b"frame_type", b"ts", b"payload", b"encoding", b"source", b"correlation_id"}


@pytest.mark.parametrize(("kw", "word"), [
    ({"metadata_json": "{not json"}, "metadata_json"),
    ({"metadata": "a", "correlation_id": "c"}, "same field"),
    ({"max_payload_bytes": -1}, "max_payload_bytes"),
    ({"max_payload_bytes": "64k"}, "max_payload_bytes"),
    ({"encoding": ""}, "encoding"),
    ({"source": "a b"}, "source"),
])
def test_frame_options_it_cannot_keep_are_refused_and_nothing_is_appended(backend, kw, word):
    t = _task(backend)
    with pytest.raises(ValueError, match=word):
        t.append_frame("log", b"x", **kw)
    assert streams.read_stream(backend, t.execution_id, t.attempt_index).frames == []
