"""The doors on an upstream FlowFabric v0.15.0 deployment (issue #40 reuses every view, action and socket; these
repeat the door walks of our own mode there): every REST operation and every page form route refuses an anonymous
client, a viewer's writes and another origin, and the walk writes nothing — upstream's records, our `ff:up:`
indexes and upstream's library alike; a websocket from another port of the host is refused, ours opens."""

from __future__ import annotations

import pytest

from tests.api import test_api_every_door as rest_doors
from tests.dashboard import test_every_page_door as page_doors
from tests.dashboard.sockets import run
from tests.dashboard.test_ws_security import LIVE, socket
from tests.keyspace import changed, keyspace
from tests.upstream_scenario import *  # noqa: F403 - the deployment's fixtures
from tests.upstream_scenario import code_digest

pytestmark = pytest.mark.django_db(transaction=True)

WHO = ["anonymous", "viewer", "other-origin"]


@pytest.mark.parametrize("who", WHO)
def test_every_rest_operation_keeps_its_door_on_upstream(who, viewer, monkeypatch, reconciled, up_backend):
    before, library = keyspace(up_backend), code_digest(up_backend.client)
    assert rest_doors.walk(who, viewer, monkeypatch) == []
    assert changed(before, keyspace(up_backend)) == []
    assert code_digest(up_backend.client) == library


@pytest.mark.parametrize("who", WHO)
def test_every_page_form_keeps_its_door_on_upstream(who, viewer, operator, reconciled, up_backend):
    before, library = keyspace(up_backend), code_digest(up_backend.client)
    # The scenario's own executions too: a real target is refused as firmly as a missing one.
    real = [f"/executions/{eid}/cancel" for eid in reconciled.solo[:2]]
    assert len(real) == 2
    assert page_doors.walk(who, viewer, operator, real) == []
    assert changed(before, keyspace(up_backend)) == []
    assert code_digest(up_backend.client) == library


@pytest.fixture
def upstream_layer(settings, up_backend):
    url = up_backend.url.replace("valkey://", "redis://")
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
                                           "CONFIG": {"hosts": [url], "prefix": "ff:ws:up:"}}}
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]


def test_a_socket_from_another_port_is_refused_and_ours_opens_on_upstream(upstream_layer, reconciled,
                                                                          operator_client):
    async def main():
        for origin in (b"http://127.0.0.1:9999", b"http://localhost:8000", b"null"):
            assert not (await socket(LIVE, operator_client, origin=origin).connect())[0], origin
        ours = socket(LIVE, operator_client, extra=[(b"sec-fetch-site", b"same-origin")])
        assert (await ours.connect())[0]
        await ours.disconnect()

    run(main)
