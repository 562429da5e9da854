"""One wake subscription per process and server, shared by every worker listening there (issue #21, S4).

A worker's wake listener was a thread and a pub/sub connection of its own: a process running fifty single-slot
workers (S4's capability pools) woke one listener thread per task handed over and held fifty connections. The hub
reads one connection for all of them and gives each worker the messages of its channels — its own
(`keys.worker_wake`) and its lanes' (`keys.lane_wake`) — in order, one batch per read, on the hub's thread.

Workers join and leave while it runs. The hub subscribes and unsubscribes on its own thread (it alone uses the
connection), woken by a message on its control channel (`keys.wake_hub`), and tells a worker it listens once the
server confirmed every channel of it — a hand-off is only published to a channel someone listens on. Losing the
connection tells every worker it no longer listens (polling goes on) until the hub has subscribed again.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis

from ffcore import keys, subscriber
from ffcore.backoff import FATAL, Backoff
from ffcore.connection import make_client

log = logging.getLogger("ffcore.worker.wake_hub")

#: How long one read waits: the hub notices a stop, and members joining without a poke, this often.
READ_S = 0.5
#: Longest pause between resubscriptions: a failover's promotion takes seconds, and a pause doubled up to
#: backoff's 5 s cap would keep the workers on polling that long after it (issue #41).
MAX_PAUSE_S = 1.0

Batch = list[tuple[str, bytes]]


@dataclass(eq=False)
class Listener:
    """A worker's part: its channels and what the hub calls on the hub's thread."""

    name: str
    channels: frozenset[str]
    #: The messages of one read on its channels, in order, and whether another listener got one of them too (a
    #: hint's claim is then better made on the worker's own thread than on the hub's, one listener after another).
    deliver: Callable[[Batch, bool], None]
    #: True once every channel is confirmed; False when the connection was lost (or the hub failed).
    listening: Callable[[bool], None]
    #: An error that no retry heals (configuration, library): the listener is dropped.
    failed: Callable[[BaseException], None]


class WakeHub:
    def __init__(self, connect: Callable[[], Any]) -> None:
        self._connect = connect
        self._client: Any = None
        self.control = keys.wake_hub(uuid.uuid4().hex)
        self._lock = threading.Lock()
        self._members: list[Listener] = []
        #: Joined, not yet told they listen.
        self._pending: list[Listener] = []
        self._thread: threading.Thread | None = None

    def join(self, listener: Listener) -> None:
        with self._lock:
            self._members.append(listener)
            self._pending.append(listener)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="ff-wake", daemon=True)
                self._thread.start()
                return
        self._poke()

    def leave(self, listener: Listener) -> None:
        with self._lock:
            if listener not in self._members:
                return
            self._members.remove(listener)
            if listener in self._pending:
                self._pending.remove(listener)
        self._poke()

    def members(self) -> int:
        with self._lock:
            return len(self._members)

    def _poke(self) -> None:
        """Wake the hub's read: it (un)subscribes now, not within READ_S (best effort)."""
        try:
            self._conn().publish(self.control, b"")
        except (redis.ConnectionError, redis.TimeoutError, OSError) as e:
            log.debug("wake hub poke failed: %s", e)

    def _conn(self) -> Any:
        # Under the lock: workers poke from their threads while the hub's thread may be making it.
        with self._lock:
            if self._client is None:
                self._client = self._connect()
            return self._client

    def _wanted(self) -> set[str] | None:
        """Every member's channels and the control channel; None, with the hub's thread marked gone, when no member
        is left (the thread then ends: the next join starts another)."""
        with self._lock:
            if not self._members:
                self._thread = None
                return None
            return {self.control}.union(*(m.channels for m in self._members))

    def _run(self) -> None:
        backoff = Backoff(max_s=MAX_PAUSE_S)
        while True:
            sub: subscriber.Subscriber | None = None
            try:
                if (want := self._wanted()) is None:
                    return
                sub = subscriber.subscribe(self._conn(), sorted(want))
                have = want
                backoff.reset()
                while True:
                    if (want := self._wanted()) is None:
                        return
                    early: Batch = []
                    if add := want - have:
                        early = sub.add(sorted(add))
                    if drop := have - want:
                        sub.remove(sorted(drop))
                    have = want
                    with self._lock:
                        ready = [m for m in self._pending if m.channels <= have]
                        for m in ready:
                            self._pending.remove(m)
                    for m in ready:
                        self._call(m, m.listening, True)
                    self._dispatch(early + sub.read(0.0 if early else READ_S))
            except FATAL as e:
                with self._lock:
                    gone, self._members, self._pending, self._thread = self._members, [], [], None
                for m in gone:
                    m.failed(e)
                return
            except Exception as e:  # noqa: BLE001 - hints only: the members poll on while it subscribes again
                with self._lock:
                    lost = [m for m in self._members if m not in self._pending]
                    self._pending += lost
                for m in lost:
                    self._call(m, m.listening, False)
                pause = backoff.failed(f"process {os.getpid()} wake listener", e, log)
                time.sleep(pause)
                if self._client is not None:  # a failover: the next subscription asks the promoted node
                    subscriber.refresh_slots(self._client)
            finally:
                if sub is not None:
                    sub.close()

    def _dispatch(self, batch: Batch) -> None:
        if not batch:
            return
        with self._lock:
            members = list(self._members)
        per: dict[int, Batch] = {}
        shared: set[int] = set()
        for ch, data in batch:
            to = [i for i, m in enumerate(members) if ch in m.channels]
            for i in to:
                per.setdefault(i, []).append((ch, data))
            if len(to) > 1:
                shared.update(to)
        for i, msgs in per.items():
            self._call(members[i], members[i].deliver, msgs, i in shared)

    def _call(self, m: Listener, fn: Callable[..., None], *args: Any) -> None:
        """A member's callback; what it raises ends that member only."""
        try:
            fn(*args)
        except FATAL as e:
            self.leave(m)
            m.failed(e)
        except Exception:  # a bug must not cost the other workers their wakes
            log.exception("wake listener of %s failed", m.name)


#: One hub per process and server URL (a forked child gets its own).
_hubs: dict[tuple[int, str], WakeHub] = {}
_hubs_lock = threading.Lock()


def hub(url: str) -> WakeHub:
    key = (os.getpid(), url)
    with _hubs_lock:
        h = _hubs.get(key)
        if h is None:
            h = _hubs[key] = WakeHub(lambda: make_client(url))
        return h
