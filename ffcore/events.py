"""Engine state-change events for live pages: a small JSON message on `ff:events` (ours).

Producers (operator actions, task terminal operations, creates, claims, scanners) call `publish()`,
which only appends to an in-process buffer: a daemon thread merges what arrived in the last
`FLUSH_MS` into ONE `PUBLISH`, so the hot path never waits for a round trip and a burst of 1,000
completions costs one message. Events are hints ("look again"), never the state itself: Pub/Sub is
at-most-once, so readers re-read what they show and keep a slow safety refresh.

Message (`v` 1): `{"v":1, "ids":[eid...], "flows":[flow_id...], "topics":[...], "created":{lane:{kind:n}},
"more":bool}` — `more` means ids were dropped (cap `MAX_IDS`); listeners then refresh broadly.
The library's own `ff:dag:completions` messages `{execution_id, flow_id, outcome}` are read as events too.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import redis
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster

from ffcore import keys

from .connection import make_client
from .errors import InvalidId
from .ids import ExecutionId

log = logging.getLogger("ffcore.events")

#: How long a burst is merged before it is published.
FLUSH_MS = 40
#: Execution ids carried by one message; beyond it `more` is set.
MAX_IDS = 500


@dataclass
class Change:
    """What changed: execution ids, flow ids, free topics, creations by lane and kind."""

    ids: set[str] = field(default_factory=set)
    flows: set[str] = field(default_factory=set)
    topics: set[str] = field(default_factory=set)
    created: dict[str, dict[str, int]] = field(default_factory=dict)
    more: bool = False

    def merge(self, other: Change) -> None:
        self.ids |= other.ids
        self.flows |= other.flows
        self.topics |= other.topics
        self.more = self.more or other.more
        for lane, kinds in other.created.items():
            mine = self.created.setdefault(lane, {})
            for kind, n in kinds.items():
                mine[kind] = mine.get(kind, 0) + n

    def __bool__(self) -> bool:
        return bool(self.ids or self.flows or self.topics or self.created or self.more)

    def to_json(self) -> str:
        ids = sorted(self.ids)
        return json.dumps({"v": 1, "ids": ids[:MAX_IDS], "flows": sorted(self.flows), "topics": sorted(self.topics),
                           "created": self.created, "more": self.more or len(ids) > MAX_IDS},
                          separators=(",", ":"))


def parse(channel: str, data: bytes | str) -> Change | None:
    """A message from `ff:events` or `ff:dag:completions` as a Change (None when malformed)."""
    try:
        m = json.loads(data)
    except ValueError:
        return None
    if not isinstance(m, dict):
        return None
    if channel == keys.DAG_COMPLETIONS_CHANNEL:
        eid, fid = m.get("execution_id"), m.get("flow_id")
        return Change({eid} if isinstance(eid, str) and eid else set(),
                      {fid} if isinstance(fid, str) and fid else set())

    def strs(v: Any) -> set[str]:
        return {x for x in v if isinstance(x, str)} if isinstance(v, list) else set()

    created: dict[str, dict[str, int]] = {}
    raw_created = m.get("created")
    if isinstance(raw_created, dict):
        for lane, kinds in raw_created.items():
            if isinstance(kinds, dict):
                created[str(lane)] = {str(k): n for k, n in kinds.items() if isinstance(n, int)}
    return Change(strs(m.get("ids")), strs(m.get("flows")), strs(m.get("topics")), created, bool(m.get("more")))


class Publisher:
    """A process's buffer for one server and its flusher thread (started on first use). It publishes on a
    client of its own, made by `connect` on the first flush (a Backend that closes does not take it along)."""

    def __init__(self, connect: Callable[[], Any], flush_ms: int = FLUSH_MS) -> None:
        self._connect = connect
        self.client: Any = None
        self.flush_ms = flush_ms
        self._pending = Change()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._running = False

    def add(self, change: Change) -> None:
        with self._lock:
            self._pending.merge(change)
        self._kick()

    def add_ids(self, ids: Iterable[str]) -> None:
        """`add` of execution ids only: the per-task hot path (no Change built, no merge)."""
        with self._lock:
            self._pending.ids.update(ids)
        self._kick()

    def _kick(self) -> None:
        if not self._running:
            with self._lock:
                if not self._running:  # first use, or the flusher died (e.g. after a fork)
                    self._running = True
                    threading.Thread(target=self._run, name="ff-events", daemon=True).start()
        if not self._wake.is_set():  # the flusher is already due: skip the Condition round (hot path)
            self._wake.set()

    def flush(self) -> None:
        with self._lock:
            change, self._pending = self._pending, Change()
        if not change:
            return
        try:
            if self.client is None:
                self.client = self._connect()
            self.client.publish(keys.EVENTS_CHANNEL, change.to_json())
        except (redis.ConnectionError, redis.TimeoutError, OSError) as e:  # a lost hint, never a failed operation
            log.debug("event publish failed: %s", e)
        except Exception as e:  # e.g. the client closed under us: the flusher must outlive it
            log.info("event publish failed (%s: %s)", type(e).__name__, e)

    def _run(self) -> None:
        try:
            while True:
                self._wake.wait()
                self._wake.clear()
                time.sleep(self.flush_ms / 1000)  # let the burst gather
                self.flush()
        finally:
            self._running = False


#: One publisher per process and server URL: every Backend of a process (a worker process may run many
#: workers, each with its own connection pool) shares its merging, so a burst costs one message per
#: FLUSH_MS, not one per client — and one flusher thread, not one per client.
_publishers: dict[tuple[int, str], Publisher] = {}
_registry_lock = threading.Lock()


def publisher(backend: Any) -> Publisher:
    """The publisher of this process for `backend`'s server (a forked child gets its own)."""
    key = (os.getpid(), backend.url)
    p = _publishers.get(key)
    if p is not None:
        return p
    with _registry_lock:
        p = _publishers.get(key)
        if p is None:
            url = backend.url
            p = _publishers[key] = Publisher(lambda: make_client(url))
        return p


def publish(backend: Any, *, ids: Iterable[str] = (), flows: Iterable[str] = (), topics: Iterable[str] = (),
            created: dict[str, dict[str, int]] | None = None) -> None:
    """Announce a state change (non-blocking; merged and published within FLUSH_MS)."""
    if not (flows or topics or created):
        if ids:
            publisher(backend).add_ids(ids)
        return
    ch = Change(set(ids), {f for f in flows if f}, set(topics), dict(created or {}))
    if ch:
        publisher(backend).add(ch)


def touched(backend: Any, target: str) -> None:
    """An operator action changed `target`: an execution id, or any other id (flow, budget, waitpoint...)."""
    try:
        publish(backend, ids=[ExecutionId(target)])
    except InvalidId:
        publish(backend, topics=[target, "overview"])


def created(backend: Any, rows: Iterable[tuple[str, str, str]]) -> None:
    """Executions were created: `(execution_id, lane, kind)` rows."""
    by_lane: dict[str, dict[str, int]] = {}
    ids = []
    for eid, lane, kind in rows:
        ids.append(eid)
        kinds = by_lane.setdefault(lane, {})
        kinds[kind] = kinds.get(kind, 0) + 1
    publish(backend, ids=ids, created=by_lane)


def flush_all() -> None:
    """Publish whatever is buffered now (process exit, tests)."""
    with _registry_lock:
        pubs = [p for (pid, _), p in _publishers.items() if pid == os.getpid()]
    for p in pubs:
        p.flush()


atexit.register(flush_all)


async def refresh_slots(aclient: Any) -> None:
    """Reload a cluster client's slot map after its subscription was lost (issue #41): its pubsub would otherwise
    keep dialling the node the old map names — a dead primary after a failover. Best effort (the cluster may
    still be electing: the next retry reloads again)."""
    if not isinstance(aclient, AsyncRedisCluster):
        return
    with contextlib.suppress(redis.RedisError, OSError):
        await aclient.nodes_manager.initialize()


async def listen(aclient: Any, *, ready: Any = None) -> AsyncIterator[Change]:
    """Yield changes from `ff:events` and `ff:dag:completions` (redis.asyncio client) until cancelled.

    `ready` (an asyncio.Event) is set once both subscriptions are live.
    """
    if isinstance(aclient, AsyncRedisCluster):
        # Its pubsub picks a node from the slot map, which only a command loads: unloaded, SUBSCRIBE
        # fails with a KeyError on the channel's slot.
        await aclient.initialize()
    ps = aclient.pubsub(ignore_subscribe_messages=True)
    await ps.subscribe(keys.EVENTS_CHANNEL, keys.DAG_COMPLETIONS_CHANNEL)
    if ready is not None:
        ready.set()
    try:
        me = asyncio.current_task()
        while True:
            msg = await ps.get_message(timeout=1.0)
            if me is not None and me.cancelling():
                # A cancel that landed as the read's own timeout fired is swallowed by redis-py (it answers None
                # for a user timeout): honour it here, or the task never ends (seen as a hung hub close).
                raise asyncio.CancelledError
            if msg is None or msg.get("type") != "message":
                continue
            ch = msg.get("channel")
            change = parse(ch.decode() if isinstance(ch, bytes) else str(ch), msg.get("data") or b"")
            if change:
                yield change
    finally:
        await ps.aclose()
