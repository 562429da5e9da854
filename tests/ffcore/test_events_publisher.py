"""Live-page events are merged per process and server, not per client (issue #21, S4): a worker process running
many workers, each with its own connection pool, sends one `ff:events` message per flush window for all of
them, from one flusher thread (on a client of its own: a Backend that closes does not take it along)."""

from __future__ import annotations

import json
import threading
from typing import Any

from ffcore import events, keys
from ffcore.backend import Backend

from .test_wake_one import drain_raw, subscribed


def _flushers() -> int:
    return sum(t.name == "ff-events" for t in threading.enumerate())


def test_backends_of_one_server_share_one_publisher_and_one_message(backend: Any) -> None:
    events.publish(backend, ids=["{fp:1}:warm"])  # this server's flusher thread runs from here on
    events.flush_all()
    flushers = _flushers()
    others = [Backend.connect(backend.settings, load=False) for _ in range(3)]
    try:
        assert {id(events.publisher(b)) for b in [backend, *others]} == {id(events.publisher(backend))}
        with subscribed(backend, keys.EVENTS_CHANNEL) as ps:
            for i, b in enumerate([backend, *others]):
                events.publish(b, ids=[f"{{fp:1}}:id-{i}"])
            msgs = drain_raw(ps)
        assert len(msgs) == 1  # one merged message, not one per client
        assert json.loads(msgs[0][1])["ids"] == [f"{{fp:1}}:id-{i}" for i in range(4)]
        assert _flushers() == flushers  # no thread of their own
    finally:
        for b in others:
            b.close()

