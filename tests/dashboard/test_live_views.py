"""Server-rendered live views (issue #36, item 3): a section is rendered once per change for every socket showing
it and pushed as HTML; bursts are coalesced; a push to a socket that closed is dropped quietly."""

from __future__ import annotations

import asyncio
import logging

import pytest

from dashboard import live, live_views
from dashboard.consumers import LiveConsumer
from ffcore.execution.client import Client
from tests.dashboard import test_consumers as tc
from tests.dashboard.test_consumers import communicator, run

redis_layer, cookie = tc.redis_layer, tc.cookie  # the consumer tests' fixtures (same layer, same session)

pytestmark = pytest.mark.django_db(transaction=True)

OVERVIEW = {"id": "overview-live", "url": "/", "topics": ["overview"], "mode": "swap"}


def test_two_sockets_showing_one_view_get_one_render_pushed_to_both(redis_layer, cookie, dashboard_backend,
                                                                     monkeypatch):
    renders: list[str] = []
    real = live_views._render_sync

    def counting(path, user, host):
        renders.append(path)
        return real(path, user, host)

    monkeypatch.setattr(live_views, "_render_sync", counting)

    async def main():
        socks = [communicator("/ws/live/", cookie) for _ in range(2)]
        for s in socks:
            assert (await s.connect())[0]
        for s in socks:
            await s.send_json_to({"views": [OVERVIEW]})
        await asyncio.wait_for(live.hub().ready.wait(), 5)
        await asyncio.sleep(0.1)
        await asyncio.to_thread(lambda: [Client(dashboard_backend).create(kind="report", lane="lane-pushed")
                                         for _ in range(20)])
        got = [await s.receive_json_from(timeout=5) for s in socks]
        for m in got:
            assert m["type"] == "view" and m["id"] == "overview-live" and m["mode"] == "swap"
            assert 'id="overview-live"' in m["html"] and "lane-pushed" in m["html"]
        assert got[0]["html"] == got[1]["html"]
        assert renders == ["/"]  # one render for both sockets and the whole burst
        for s in socks:
            await s.disconnect()

    run(main)


def test_a_view_nobody_could_render_is_ignored(redis_layer, cookie, dashboard_backend):
    async def main():
        s = communicator("/ws/live/", cookie)
        assert (await s.connect())[0]
        await s.send_json_to({"views": [{"id": "x", "url": "http://elsewhere.example/", "topics": ["overview"]},
                                        {"id": "y", "url": "/no/such/page/", "topics": ["overview"]},
                                        {"id": "z", "url": "/", "topics": "overview"}]})
        await asyncio.wait_for(live.hub().ready.wait(), 5)
        await asyncio.sleep(0.1)
        assert live.hub().views.views == {}
        await asyncio.to_thread(lambda: Client(dashboard_backend).create(kind="report"))
        assert await s.receive_nothing(timeout=1.5)
        await s.disconnect()

    run(main)


def test_a_push_to_a_socket_that_closed_is_dropped_quietly(monkeypatch, caplog):
    from channels.generic.websocket import AsyncWebsocketConsumer

    class Disconnected(Exception):
        pass

    async def closed(self, *a, **kw):
        raise Disconnected("the peer is gone")

    monkeypatch.setattr(AsyncWebsocketConsumer, "send", closed)
    with caplog.at_level(logging.WARNING):
        asyncio.run(LiveConsumer().send(text_data="{}"))
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_only_the_dashboard_s_own_pages_can_be_registered_as_views():
    assert live_views._parse({"id": "a", "url": "/", "topics": ["overview"]}) is not None
    assert live_views._parse({"id": "a", "url": "/live/rows/?lane=x", "topics": ["executions"], "mode": "rows"})
    for url in ("/admin/", "/v1/executions", "/no/such/page/", "//elsewhere.example/"):
        assert live_views._parse({"id": "a", "url": url, "topics": ["overview"]}) is None, url
