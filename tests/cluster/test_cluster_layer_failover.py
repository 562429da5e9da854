"""The channel layer follows a failover of the node the cluster URL names (issue #41 item 3): a group message
sent after that node died and its replica took over still reaches a subscribed channel."""

from __future__ import annotations

import asyncio
import contextlib
import time

import redis
from channels_redis.pubsub import RedisPubSubChannelLayer

from dashboard.settings import channel_layers
from ffcore.embedded import EmbeddedCluster
from tests.bounded import arun
from tests.cluster.conftest import KILLED, KILLED_REPLICA

PROMOTION_BOUND_S = 20.0
DELIVERY_BOUND_S = 15.0


def _layer(url: str) -> RedisPubSubChannelLayer:
    config = channel_layers(url)["default"]
    return RedisPubSubChannelLayer(**config["CONFIG"])  # type: ignore[index]


def test_a_group_message_after_the_named_node_failed_over_still_arrives(ha_cluster: EmbeddedCluster):
    url = f"valkey+cluster://127.0.0.1:{ha_cluster.nodes[KILLED].port}"  # the URL names the node that dies

    async def main() -> tuple[dict, dict]:
        sender, receiver = _layer(url), _layer(url)
        channel = await receiver.new_channel()
        await receiver.group_add("g", channel)
        await sender.group_send("g", {"type": "t", "n": 1})
        before = await asyncio.wait_for(receiver.receive(channel), 5)
        ha_cluster.kill(KILLED)
        deadline = time.monotonic() + PROMOTION_BOUND_S
        while ha_cluster.role(KILLED_REPLICA) != "master":
            assert time.monotonic() < deadline, "the replica was never promoted"
            await asyncio.sleep(0.1)
        got = asyncio.ensure_future(receiver.receive(channel))
        deadline = time.monotonic() + DELIVERY_BOUND_S
        n = 1
        while not got.done():  # the receiver re-subscribes on its own; keep sending until one arrives
            assert time.monotonic() < deadline, "no group message arrived after the failover"
            n += 1
            with contextlib.suppress(redis.ConnectionError):  # the sender's own reconnect may be refused once
                await sender.group_send("g", {"type": "t", "n": n})
            await asyncio.sleep(0.3)
        after = got.result()
        await sender.flush()
        await receiver.flush()
        return before, after

    before, after = arun(asyncio.wait_for(main(), 40))
    assert before["n"] == 1 and after["n"] >= 2
