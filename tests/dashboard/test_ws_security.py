"""Websocket attacks (issue #37): handshakes from another origin, unknown paths, and sockets that outlive
their session (logout, deactivation, a lost role). Through the real ASGI app and a channels-redis layer."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import Group

from dashboard import ws_session
from tests.dashboard.sockets import run
from tests.keyspace import MISSING_EID

pytestmark = pytest.mark.django_db(transaction=True)

HOST = b"127.0.0.1:8000"
OURS = b"http://127.0.0.1:8000"
LIVE = "/ws/live/?topics=overview,executions"


@pytest.fixture
def redis_layer(settings, dashboard_backend):
    url = dashboard_backend.url.replace("valkey://", "redis://")
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
                                           "CONFIG": {"hosts": [url], "prefix": "ff:ws:sec:"}}}



def socket(path: str, client: Any, origin: bytes = OURS, host: bytes = HOST,
           extra: list[tuple[bytes, bytes]] | None = None) -> WebsocketCommunicator:
    from dashboard.asgi import application

    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    headers = [(b"host", host), (b"origin", origin), (b"cookie", cookie), *(extra or [])]
    return WebsocketCommunicator(application, path, headers=headers)


async def closed_with(comm: WebsocketCommunicator, within_s: float) -> int:
    """The close code the server sends within `within_s` (pushes before it are skipped)."""
    deadline = asyncio.get_running_loop().time() + within_s
    while True:
        left = deadline - asyncio.get_running_loop().time()
        assert left > 0, "the socket stayed open"
        try:
            out = await comm.receive_output(timeout=left)
        except TimeoutError:
            raise AssertionError("the socket stayed open") from None
        if out["type"] == "websocket.close":
            return int(out["code"])


@pytest.fixture
def settings_hosts(settings):
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]


# ------------------------------------------------------------------ handshakes
def test_a_page_on_another_port_of_the_same_host_cannot_open_a_socket(redis_layer, settings_hosts,
                                                                       operator_client):
    async def main():
        for origin in (b"http://127.0.0.1:9999", b"http://127.0.0.1", b"https://127.0.0.1:8000",
                       b"http://localhost:8000", b"null"):
            connected, _ = await socket(LIVE, operator_client, origin=origin).connect()
            assert not connected, origin

    run(main)


def test_a_handshake_the_browser_marks_as_same_site_is_refused(redis_layer, settings_hosts, operator_client):
    async def main():
        comm = socket(LIVE, operator_client, extra=[(b"sec-fetch-site", b"same-site")])
        assert not (await comm.connect())[0]

    run(main)


def test_a_host_outside_allowed_hosts_is_refused_even_with_a_matching_origin(redis_layer, settings_hosts,
                                                                             operator_client):
    async def main():
        comm = socket(LIVE, operator_client, origin=b"http://evil.example", host=b"evil.example")
        assert not (await comm.connect())[0]

    run(main)


def test_our_own_page_still_opens_its_socket(redis_layer, settings_hosts, operator_client):
    async def main():
        comm = socket(LIVE, operator_client, extra=[(b"sec-fetch-site", b"same-origin")])
        assert (await comm.connect())[0]
        await comm.disconnect()

    run(main)


def test_a_trusted_origin_behind_a_proxy_opens_its_socket(redis_layer, settings, settings_hosts, operator_client):
    settings.CSRF_TRUSTED_ORIGINS = ["https://ff.example.com"]
    settings.ALLOWED_HOSTS = ["ff.example.com"]

    async def main():
        comm = socket(LIVE, operator_client, origin=b"https://ff.example.com", host=b"ff.example.com")
        assert (await comm.connect())[0]
        await comm.disconnect()

    run(main)


def test_an_unknown_socket_path_is_refused_with_4404_instead_of_failing(redis_layer, settings_hosts,
                                                                        operator_client):
    async def main():
        connected, code = await socket("/ws/nothing/", operator_client).connect()
        assert not connected and code == 4404

    run(main)


def test_a_stream_socket_cursor_beyond_64_bits_is_refused_with_4400(redis_layer, settings_hosts, operator_client):
    async def main():
        path = f"/ws/stream/{MISSING_EID}/0/?after="
        connected, code = await socket(path + "18446744073709551616-0", operator_client).connect()
        assert not connected and code == 4400
        ok = socket(path + "18446744073709551615-0", operator_client)
        assert (await ok.connect())[0]  # the largest id is a cursor like any other
        await ok.disconnect()

    run(main)


# ------------------------------------------------------------------ sockets end with the session
def test_a_socket_is_closed_within_seconds_after_its_user_logs_out(redis_layer, settings_hosts, operator_client):
    async def main():
        comm = socket(LIVE, operator_client)
        assert (await comm.connect())[0]
        await sync_to_async(operator_client.post)("/logout/")
        assert await closed_with(comm, ws_session.SESSION_CHECK_S + 3) == 4401

    run(main)


def test_a_socket_is_closed_when_its_user_is_deactivated(redis_layer, settings_hosts, operator, operator_client,
                                                         monkeypatch):
    monkeypatch.setattr(ws_session, "SESSION_CHECK_S", 0.3)

    async def main():
        comm = socket("/ws/live/?topics=overview", operator_client)
        assert (await comm.connect())[0]
        operator.is_active = False
        await sync_to_async(operator.save)()
        assert await closed_with(comm, 3) == 4401

    run(main)


def test_a_socket_is_closed_when_its_user_loses_the_operator_role(redis_layer, settings_hosts, operator,
                                                                  operator_client, monkeypatch):
    monkeypatch.setattr(ws_session, "SESSION_CHECK_S", 0.3)

    async def main():
        comm = socket("/ws/live/?topics=overview", operator_client)
        assert (await comm.connect())[0]
        await sync_to_async(lambda: operator.groups.remove(Group.objects.get(name="operator")))()
        assert await closed_with(comm, 3) == 4401

    run(main)


def test_a_socket_of_a_user_still_signed_in_stays_open(redis_layer, settings_hosts, operator_client, monkeypatch):
    monkeypatch.setattr(ws_session, "SESSION_CHECK_S", 0.2)

    async def main():
        comm = socket("/ws/live/?topics=overview", operator_client)
        assert (await comm.connect())[0]
        assert await comm.receive_nothing(timeout=1.0)
        await comm.disconnect()

    run(main)
