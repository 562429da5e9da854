"""Pub/Sub in tests: a subscription that is live on the server before the test goes on."""

from __future__ import annotations

import time
from typing import Any

from ffcore.reads import text


def confirmed_pubsub(client: Any, *channels: str, timeout_s: float = 10.0) -> Any:
    """A redis-py PubSub subscribed to `channels` with every confirmation read, so the subscription is live when
    this returns: a SUBSCRIBE only sent may still wait behind another client's PUBLISH on a busy server (a short
    read that times out looks the same as a confirmation dropped by ignore_subscribe_messages). Later reads skip
    subscribe confirmations."""
    ps = client.pubsub()
    ps.subscribe(*channels)
    waiting = set(channels)
    deadline = time.monotonic() + timeout_s
    while waiting:
        left = deadline - time.monotonic()
        if left <= 0:
            ps.close()
            raise AssertionError(f"subscriptions to {sorted(waiting)} were never confirmed")
        m = ps.get_message(timeout=left)
        if m is not None and m["type"] == "subscribe":
            waiting.discard(text(m["channel"]))
    ps.ignore_subscribe_messages = True
    return ps
