"""The wake listener's Pub/Sub reader (ffcore/subscriber.py): a dedicated connection of the client's pool (AUTH
included: the test server refuses clients without it) read straight from its socket."""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis

from ffcore import subscriber
from ffcore.subscriber import RawSubscriber


def _numsub(backend: Any, channel: str) -> int:
    return int(dict(backend.client.pubsub_numsub(channel)).get(channel.encode(), 0))


def test_the_subscription_is_live_when_it_returns_and_gone_when_closed(backend: Any) -> None:
    sub = subscriber.subscribe(backend.client, ["t:a", "t:b"])
    assert isinstance(sub, RawSubscriber)
    try:
        assert _numsub(backend, "t:a") == _numsub(backend, "t:b") == 1
    finally:
        sub.close()
    assert _numsub(backend, "t:a") == 0


def test_messages_arrive_intact_and_what_queued_comes_in_one_read(backend: Any) -> None:
    sub = subscriber.subscribe(backend.client, ["t:a", "t:b"])
    try:
        started = time.monotonic()
        assert sub.read(0.1) == []  # nothing yet: waits its timeout, no more
        assert 0.08 <= time.monotonic() - started < 5.0  # its own timeout, not a read without one
        payload = b"\x01\x00\xff\r\n" + b"x" * 70_000  # binary, and larger than one socket read
        pipe = backend.client.pipeline(transaction=False)
        pipe.publish("t:a", payload)
        pipe.publish("t:b", b"2")
        pipe.publish("t:a", b"3")
        pipe.execute()
        got: list[tuple[str, bytes]] = []
        while len(got) < 3:
            batch = sub.read(2.0)
            assert batch, "a published message never arrived"
            got += batch
        assert got == [("t:a", payload), ("t:b", b"2"), ("t:a", b"3")]
    finally:
        sub.close()


def test_a_connection_the_server_drops_is_reported_not_read_as_silence(backend: Any) -> None:
    sub = subscriber.subscribe(backend.client, ["t:kill"])
    try:
        backend.client.client_kill_filter(_type="pubsub")
        with pytest.raises(redis.ConnectionError):
            for _ in range(20):  # a dropped socket reads as closed at once, never as a timeout
                sub.read(0.5)
    finally:
        sub.close()


def test_a_zero_timeout_read_polls_the_socket_without_blocking(backend: Any) -> None:
    sub = subscriber.subscribe(backend.client, ["t:poll"])
    try:
        started = time.monotonic()
        assert sub.read(0.0) == []  # nothing there: returns at once
        assert time.monotonic() - started < 5.0  # returns without waiting (generous for a busy machine)
        backend.client.publish("t:poll", b"hi")
        got: list[tuple[str, bytes]] = []
        deadline = time.monotonic() + 5.0
        while not got and time.monotonic() < deadline:  # the message reaches the socket shortly after PUBLISH
            got = sub.read(0.0)
        assert got == [("t:poll", b"hi")]
    finally:
        sub.close()


def test_subscribing_again_and_again_does_not_use_up_the_client_pool(backend: Any) -> None:
    pool = redis.ConnectionPool(**backend.client.connection_pool.connection_kwargs, max_connections=2)
    client = redis.Redis(connection_pool=pool)
    try:
        for _ in range(4):  # a listener resubscribes after every transport error
            subscriber.subscribe(client, ["t:again"]).close()
        assert client.ping()  # the pool's own connections are still there to be made
    finally:
        pool.disconnect()
