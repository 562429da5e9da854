"""Pub/Sub reading for the worker's driver (ffcore.worker.driver; issue #21: one message per task on the per-call path).

redis-py's `PubSub.get_message` costs ≈ 90 µs of CPU per message when messages come one at a time (a readiness
poll, the read, then another poll to see whether more wait) — against ≈ 30 µs for a blocking read of the socket
parsed by hiredis. On a standalone server the listener reads its own connection that way: `read()` waits for
the first message and returns every message that one read brought, so hints that queued up are still taken
together. A cluster client routes subscriptions by slot: there redis-py's PubSub is kept behind the same API.
"""

from __future__ import annotations

import logging
import ssl
import time
from collections.abc import Sequence
from typing import Any, Protocol

import hiredis
import redis

from .reads import text

log = logging.getLogger("ffcore.subscriber")

CLOSE_WAIT_S = 1.0  # how long close() waits for the server to confirm the unsubscription before closing anyway


class Subscriber(Protocol):
    def read(self, timeout_s: float) -> list[tuple[str, bytes]]:
        """(channel, data) of the messages available, waiting up to `timeout_s` for the first; [] if none."""
        ...

    def add(self, channels: Sequence[str]) -> list[tuple[str, bytes]]:
        """Subscribe to more channels, live when this returns (standalone; cluster: once sent); the messages
        read meanwhile."""
        ...

    def remove(self, channels: Sequence[str]) -> None:
        """Unsubscribe (messages already on their way may still be read)."""
        ...

    def close(self) -> None:
        """End the subscription (standalone: gone from the server when this returns)."""
        ...

    def fileno(self) -> int | None:
        """The socket to select() on for the next message (None: none of its own; poll `read`)."""
        ...


def subscribe(client: Any, channels: Sequence[str]) -> Subscriber:
    """A subscription to `channels`, live when this returns (standalone) or once redis-py has sent it (cluster)."""
    if hasattr(client, "get_primaries"):
        return _ClientPubSub(client, channels)
    return RawSubscriber(client, channels)


def refresh_slots(client: Any) -> None:
    """After a lost subscription on a cluster, reload the slot map before subscribing again (issue #41): redis-py's
    PubSub picks its node from the map and never reloads it itself, so it would keep dialling a dead primary until
    a command elsewhere hit a MOVED (~11 s measured) although its replica was promoted long before. Best effort:
    while the cluster is still electing, the next try reloads again."""
    nodes = getattr(client, "nodes_manager", None)
    if nodes is None:
        return
    try:
        nodes.initialize()
    except (redis.RedisError, OSError) as e:
        log.debug("slot map refresh failed: %s", e)


class RawSubscriber:
    """A dedicated connection (made with the client's pool settings, so AUTH, TLS and the client name apply) in
    subscribe mode, read straight from its socket."""

    def __init__(self, client: Any, channels: Sequence[str]) -> None:
        # Built from the pool's class and settings, not pool.make_connection(): that counts the connection against
        # max_connections, and one never given back would use up the pool one resubscription at a time.
        pool = client.connection_pool
        self._conn = pool.connection_class(**pool.connection_kwargs)
        self._reader = hiredis.Reader()
        try:
            self._conn.connect()
            self._sock = self._conn._sock
            self._early = self.add(channels)  # messages on the first channels while the others were confirmed
        except BaseException:
            self._conn.disconnect()
            raise

    def _send(self, *args: str) -> None:
        # Not send_command: its health check would PING and read the reply with redis-py's parser, off this stream.
        self._conn.send_packed_command(self._conn.pack_command(*args), check_health=False)

    def add(self, channels: Sequence[str]) -> list[tuple[str, bytes]]:
        self._send("SUBSCRIBE", *channels)
        got: list[tuple[str, bytes]] = []
        confirmed = 0
        while confirmed < len(channels):  # the subscriptions are live once each is confirmed
            replies = self._replies(self._conn.socket_timeout or 10.0)
            if not replies:
                raise redis.TimeoutError("the wake subscription was not confirmed")
            for kind, ch, data in replies:
                confirmed += kind == b"subscribe"
                if kind == b"message":
                    got.append((text(ch), data))
        return got

    def remove(self, channels: Sequence[str]) -> None:
        self._send("UNSUBSCRIBE", *channels)  # its confirmations are read (and dropped) by read()

    def _parsed(self) -> list[tuple[bytes, Any, Any]]:
        out: list[tuple[bytes, Any, Any]] = []
        while (r := self._reader.gets()) is not False:
            if isinstance(r, Exception):  # an error reply (hiredis returns it)
                raise r
            out.append((r[0], r[1], r[2] if len(r) > 2 else None))
        return out

    def _replies(self, timeout_s: float) -> list[tuple[bytes, Any, Any]]:
        """What is parsed already, else the replies the next reads complete (waiting up to `timeout_s`; with 0 the
        socket is still read once, without blocking, so a poll sees what has arrived)."""
        deadline = time.monotonic() + timeout_s
        while not (out := self._parsed()):
            self._sock.settimeout(max(deadline - time.monotonic(), 0.0))  # 0.0 = non-blocking
            try:
                data = self._sock.recv(65536)
            except (TimeoutError, BlockingIOError, ssl.SSLWantReadError):  # before OSError: they subclass it
                return []
            except OSError as e:
                raise redis.ConnectionError(f"wake subscription lost: {e}") from e
            if not data:
                raise redis.ConnectionError("wake subscription closed by the server")
            self._reader.feed(data)
        return out

    def fileno(self) -> int | None:
        return int(self._sock.fileno())

    def read(self, timeout_s: float) -> list[tuple[str, bytes]]:
        early, self._early = self._early, []
        return early + [(text(ch), data) for kind, ch, data in self._replies(0.0 if early else timeout_s)
                        if kind == b"message"]

    def close(self) -> None:
        # Unsubscribed and confirmed before the socket closes, so the subscription is gone when this returns: after
        # a bare disconnect the server drops it only when it gets to the closed socket, which may come after
        # commands other clients sent meanwhile (a PUBSUB NUMSUB would still count it).
        try:
            self._send("UNSUBSCRIBE")
            deadline = time.monotonic() + CLOSE_WAIT_S
            while (left := deadline - time.monotonic()) > 0:
                replies = self._replies(left)
                if not replies or any(kind == b"unsubscribe" and data == 0 for kind, _ch, data in replies):
                    break
        except (redis.RedisError, OSError, hiredis.HiredisError):
            pass  # a connection already lost holds no subscription
        finally:
            self._conn.disconnect()


class _ClientPubSub:
    """redis-py's PubSub behind Subscriber's API (a cluster client's, which picks each channel's node)."""

    def __init__(self, client: Any, channels: Sequence[str]) -> None:
        self._ps = client.pubsub(ignore_subscribe_messages=True)
        self._ps.subscribe(*channels)

    def read(self, timeout_s: float) -> list[tuple[str, bytes]]:
        out: list[tuple[str, bytes]] = []
        m = self._ps.get_message(timeout=timeout_s)
        while m is not None:
            out.append((text(m.get("channel")), m.get("data")))
            m = self._ps.get_message(timeout=0.0)
        return out

    def add(self, channels: Sequence[str]) -> list[tuple[str, bytes]]:
        self._ps.subscribe(*channels)
        return []

    def fileno(self) -> int | None:
        sock = getattr(getattr(self._ps, "connection", None), "_sock", None)
        return None if sock is None else int(sock.fileno())

    def remove(self, channels: Sequence[str]) -> None:
        self._ps.unsubscribe(*channels)

    def close(self) -> None:
        self._ps.close()

