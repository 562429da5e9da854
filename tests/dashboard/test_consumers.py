"""Websocket consumers through the real ASGI app (session auth, origin check) and the channels-redis layer
on the test Valkey: the live stream tail and pushed refreshes."""

from __future__ import annotations

import asyncio
import re
import time

import pytest
from channels.testing import WebsocketCommunicator

from dashboard import actions, live
from ffcore import events
from ffcore.execution.client import Client
from ffcore.worker.worker import Registry, Worker, WorkerConfig
from tests.dashboard.sockets import run

pytestmark = pytest.mark.django_db(transaction=True)

_IDS = re.compile(r'data-id="([0-9]+-[0-9]+)"')


@pytest.fixture
def redis_layer(settings, dashboard_backend):
    url = dashboard_backend.url.replace("valkey://", "redis://")
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
                                           "CONFIG": {"hosts": [url], "prefix": "ff:ws:test:"}}}
    return settings.CHANNEL_LAYERS


@pytest.fixture
def cookie(viewer_client) -> bytes:
    return f"sessionid={viewer_client.cookies['sessionid'].value}".encode()


@pytest.fixture
def task(dashboard_backend):
    Client(dashboard_backend).create(kind="job")
    (t,) = Worker(dashboard_backend, WorkerConfig(worker_instance_id="w-ws"), Registry()).claim_next(1)
    return t



def communicator(path: str, cookie: bytes | None, origin: bytes = b"http://testserver") -> WebsocketCommunicator:
    from dashboard.asgi import application

    headers = [(b"host", b"testserver"), (b"origin", origin)] + ([(b"cookie", cookie)] if cookie else [])
    return WebsocketCommunicator(application, path, headers=headers)


def stream_path(t, after: str | None = None) -> str:
    return f"/ws/stream/{t.execution_id}/{t.attempt_index}/" + (f"?after={after}" if after else "")


async def frames_until(comm: WebsocketCommunicator, last: str) -> list[str]:
    """Ids of every frame received until the frame `last` arrives (fails on a timeout)."""
    ids: list[str] = []
    while not ids or ids[-1] != last:
        m = await comm.receive_json_from(timeout=5)
        if m["type"] == "frames":
            ids += _IDS.findall(m["html"])
    return ids


async def append(t, n: int, tag: str) -> list[str]:
    done = await asyncio.to_thread(lambda: [t.append_frame("log", f"{tag}{i}") for i in range(n)])
    return [r.stream_id for r in done]


# ------------------------------------------------------------------ refusals
def test_an_anonymous_socket_is_refused(redis_layer, task):
    async def main():
        for path in (stream_path(task), "/ws/live/?topics=overview"):
            comm = communicator(path, None)
            connected, code = await comm.connect()
            assert not connected and code == 4401

    run(main)


def test_a_socket_from_a_foreign_origin_is_refused(redis_layer, task, cookie):
    async def main():
        comm = communicator(stream_path(task), cookie, origin=b"http://evil.example")
        connected, _ = await comm.connect()
        assert not connected

    run(main)


def test_a_malformed_cursor_or_topic_list_is_refused(redis_layer, task, cookie):
    async def main():
        # (a live socket without topics is fine: a page may follow only server-rendered views)
        too_many = "/ws/live/?topics=" + ",".join(f"t{i}" for i in range(40))
        for path in (stream_path(task, "not-an-id"), "/ws/live/?topics=<script>", too_many):
            connected, code = await communicator(path, cookie).connect()
            assert not connected and code == 4400

    run(main)


# ------------------------------------------------------------------ stream tail
def test_a_viewer_gets_the_newest_frames_then_every_new_one_in_order_then_the_close(redis_layer, task, cookie):
    async def main():
        before = await append(task, 3, "old")
        comm = communicator(stream_path(task), cookie)
        assert (await comm.connect())[0]
        assert await frames_until(comm, before[-1]) == before
        await asyncio.sleep(0.3)  # the tailer starts after the opening read
        more = await append(task, 25, "new")
        assert await frames_until(comm, more[-1]) == more
        await asyncio.to_thread(task.complete)
        m = await comm.receive_json_from(timeout=5)
        assert m["type"] == "closed" and m["reason"] == "attempt_success" and "stream closed" in m["html"]
        await comm.disconnect()

    run(main)


def test_a_reconnect_with_a_cursor_gets_no_gaps_and_no_duplicates(redis_layer, task, cookie):
    async def main():
        first = await append(task, 4, "a")
        comm = communicator(stream_path(task), cookie)
        await comm.connect()
        seen = await frames_until(comm, first[-1])
        await comm.disconnect()
        missed = await append(task, 5, "b")  # written while the viewer was away
        comm = communicator(stream_path(task, seen[-1]), cookie)
        assert (await comm.connect())[0]
        seen += await frames_until(comm, missed[-1])
        later = await append(task, 6, "c")  # delivered by the tailer, after the catch-up read
        seen += await frames_until(comm, later[-1])
        assert seen == first + missed + later
        assert await comm.receive_nothing(timeout=0.5)
        await comm.disconnect()

    run(main)


def test_many_viewers_of_one_stream_share_one_tailer(redis_layer, task, cookie):
    async def main():
        comms = [communicator(stream_path(task), cookie) for _ in range(5)]
        for c in comms:
            await c.connect()
        await asyncio.sleep(0.3)
        ids = await append(task, 10, "x")
        for c in comms:
            assert await frames_until(c, ids[-1]) == ids
        h = live.hub()
        assert len([t for t in h.tailers.values() if not t.done()]) == 1
        assert h.watched[(task.execution_id, task.attempt_index)] == 5
        for c in comms:
            await c.disconnect()
        assert (task.execution_id, task.attempt_index) not in h.watched

    run(main)


def test_a_closed_stream_sends_its_frames_and_the_marker_at_once(redis_layer, task, cookie):
    async def main():
        ids = await append(task, 2, "z")
        await asyncio.to_thread(task.fail, "boom")
        comm = communicator(stream_path(task), cookie)
        await comm.connect()
        assert await frames_until(comm, ids[-1]) == ids
        m = await comm.receive_json_from(timeout=5)
        assert m["type"] == "closed" and m["reason"] == "attempt_failure"

    run(main)


def test_a_slow_writer_s_frames_are_not_held_for_the_fast_writer_s_interval(redis_layer, task, cookie, monkeypatch):
    # Issue #21 (D3): a batch of one or two frames lets the next follow after QUICK_INTERVAL_S; only a fast
    # writer's (bigger) batches wait BATCH_INTERVAL_S — here far longer than the receive timeout, so a frame
    # held for it would fail the test.
    monkeypatch.setattr(live, "BATCH_INTERVAL_S", 60.0)

    async def main():
        comm = communicator(stream_path(task), cookie)
        assert (await comm.connect())[0]
        await asyncio.sleep(0.3)  # the tailer starts after the opening read
        seen: list[str] = []
        for n in range(4):
            (one,) = await append(task, 1, f"s{n}")
            seen += await frames_until(comm, one)
            assert seen[-1] == one
        await comm.disconnect()

    run(main)


# ------------------------------------------------------------------ pushed refreshes
def test_pushes_name_the_changed_topics_and_creations(redis_layer, cookie, dashboard_backend):
    async def main():
        comm = communicator("/ws/live/?topics=overview,executions", cookie)
        assert (await comm.connect())[0]
        await asyncio.wait_for(live.hub().ready.wait(), 5)
        await asyncio.to_thread(lambda: Client(dashboard_backend).create(kind="report", lane="gpu"))
        m = await comm.receive_json_from(timeout=5)
        assert m["type"] == "refresh" and set(m["topics"]) == {"overview", "executions"}
        assert m["created"] == {"gpu": {"report": 1}}
        await comm.disconnect()

    run(main)


def test_an_operator_action_refreshes_that_execution_s_page(redis_layer, cookie, dashboard_backend):
    eid = Client(dashboard_backend).create(kind="job").execution_id

    async def main():
        comm = communicator(f"/ws/live/?topics={eid}", cookie)
        await comm.connect()
        await asyncio.wait_for(live.hub().ready.wait(), 5)
        res = await asyncio.to_thread(actions.cancel, dashboard_backend, "otto", eid, "test")
        assert res.ok
        m = await comm.receive_json_from(timeout=5)
        assert m["topics"] == [eid]
        await comm.disconnect()

    run(main)


def test_a_burst_of_changes_is_coalesced_and_a_paused_socket_waits(redis_layer, cookie, dashboard_backend):
    async def main():
        comm = communicator("/ws/live/?topics=overview", cookie)
        await comm.connect()
        await asyncio.wait_for(live.hub().ready.wait(), 5)
        c = Client(dashboard_backend)

        def burst():
            for _ in range(30):
                c.create(kind="job")

        await asyncio.to_thread(burst)
        pushes = 0
        while not await comm.receive_nothing(timeout=0.6):
            await comm.receive_json_from()
            pushes += 1
        assert 1 <= pushes <= 4
        await comm.send_json_to({"pause": True})
        await asyncio.sleep(0.1)
        await asyncio.to_thread(burst)
        assert await comm.receive_nothing(timeout=0.6)
        await comm.send_json_to({"pause": False})
        m = await comm.receive_json_from(timeout=2)
        assert m["topics"] == ["overview"]
        assert await comm.receive_nothing(timeout=0.4)
        await comm.disconnect()

    run(main)


def test_an_unrelated_change_is_not_pushed(redis_layer, cookie, dashboard_backend):
    other = Client(dashboard_backend).create(kind="job").execution_id
    mine = Client(dashboard_backend).create(kind="job").execution_id
    events.flush_all()  # the creations' own event must not count
    time.sleep(0.1)

    async def main():
        comm = communicator(f"/ws/live/?topics={mine}", cookie)
        await comm.connect()
        await asyncio.wait_for(live.hub().ready.wait(), 5)
        await asyncio.to_thread(actions.cancel, dashboard_backend, "otto", other, "test")
        assert await comm.receive_nothing(timeout=0.6)
        await comm.disconnect()

    run(main)



def test_a_page_following_a_flow_hears_when_a_member_is_claimed(redis_layer, cookie, dashboard_backend):
    from ffcore.flows.flows import Flows

    flows = Flows(dashboard_backend)
    fid = flows.create()
    member = flows.add_member(fid, kind="step", lane="flowlane")
    events.flush_all()
    time.sleep(0.1)

    async def main():
        comm = communicator(f"/ws/live/?topics={fid}", cookie)
        await comm.connect()
        await asyncio.wait_for(live.hub().ready.wait(), 5)
        worker = Worker(dashboard_backend, WorkerConfig(lanes=("flowlane",), worker_instance_id="w-fl"), Registry())
        (t,) = await asyncio.to_thread(worker.claim_next, 1)  # the claim event names only the execution
        assert t.execution_id == member
        m = await comm.receive_json_from(timeout=5)
        assert m["topics"] == [fid]
        await comm.disconnect()

    run(main)
