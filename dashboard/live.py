"""The live hub of one dashboard process (one per event loop): the event relay and the stream tailers.

- **Relay**: one `SUBSCRIBE ff:events ff:dag:completions` per process. Changes arriving within
  `RELAY_WINDOW_S` are merged, mapped to topics, and handed to this process's `LiveConsumer`s that
  subscribed to them (Pub/Sub already fans out to every process, so no channel-layer hop is needed).
- **Views**: the live sections pages show, rendered once per process and pushed (`dashboard.live_views`).
- **Tailers**: one per watched attempt stream across all processes (`TailLock`); its batches are
  rendered to HTML once and `group_send` to the stream's group on the channel layer, so 50 viewers of
  one stream cost one `XREAD` and one publish per batch. At most `MAX_TAILERS` per process.

Topics are plain strings: an id (execution id, flow id, budget id…) or a collection name
(`overview`, `executions`, `flows`, plus whatever other pages publish).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import time
import weakref
from typing import TYPE_CHECKING

from channels.layers import get_channel_layer
from django.template.loader import render_to_string

from ffcore import events
from ffcore.errors import InvalidId
from ffcore.events import Change
from ffcore.ids import ExecutionId
from ffcore.keys import ExecKeys
from ffcore.reads import text
from ffcore.streams import tail as stream_tail
from ffcore.streams.streams import Frame

from .backend import get_backend
from .live_views import Views
from .selectors.streams import frame_view

if TYPE_CHECKING:
    from .consumers import LiveConsumer

log = logging.getLogger("dashboard.live")

#: Changes merged before they are dispatched to consumers.
RELAY_WINDOW_S = 0.1
#: Tailers one process runs at most (each holds one connection in XREAD BLOCK).
MAX_TAILERS = 64
#: Shortest time between two batches of one stream's tailer while its writer is fast (a batch of more than
#: QUICK_BATCH_FRAMES frames): a fast writer's frames gather in the stream and go out together.
BATCH_INTERVAL_S = 0.05
#: After a batch of at most QUICK_BATCH_FRAMES frames (a slow writer), the next may follow this soon: a frame
#: of a slow stream goes out when it arrives instead of waiting out BATCH_INTERVAL_S (issue #21, D3: that
#: wait was ~25 of the ~28 ms append -> browser at 50 frames/s), and a writer speeding up is throttled again
#: after one short batch.
QUICK_INTERVAL_S = 0.01
QUICK_BATCH_FRAMES = 2
#: How often watched streams refresh their "wanted" mark and get a tailer if theirs died.
MAINTAIN_S = 3.0
#: Ids beyond which a change refreshes everything a consumer follows.
BROAD = "*"
#: Topics naming a collection page rather than one id.
COLLECTIONS = frozenset({"overview", "executions", "flows", "budgets", "quotas", "waitpoints", "workers", BROAD})


def _is_eid(value: str) -> bool:
    try:
        ExecutionId(value)
    except InvalidId:
        return False
    return True


def topics_for(ch: Change) -> set[str]:
    t = set(ch.topics) | set(ch.ids) | set(ch.flows)
    if ch.ids or ch.created or ch.more:
        t |= {"overview", "executions"}
    if ch.flows:
        t.add("flows")
    if ch.more:
        t.add(BROAD)
    return t


def stream_group(eid: str, i: int) -> str:
    """Channel-layer group of one attempt stream (group names allow only [a-zA-Z0-9._-])."""
    return "stream." + hashlib.sha1(f"{eid}:{i}".encode()).hexdigest()[:32]


def render_frames(eid: str, i: int, frames: list[Frame]) -> list[list[str]]:
    """[[id, html], ...]: each frame rendered (and escaped) by the same partial as the page."""
    return [[f.id, render_to_string("dashboard/stream.html#frame", {"f": frame_view(f), "eid": eid, "attempt": i})]
            for f in frames]


def frames_message(pairs: list[list[str]]) -> str:
    """The websocket message for a run of rendered frames (built once per batch, sent to every viewer)."""
    if not pairs:
        return ""
    return json.dumps({"type": "frames", "first": pairs[0][0], "last": pairs[-1][0],
                       "html": "".join(p[1] for p in pairs)})


class Hub:
    def __init__(self) -> None:
        self.url = get_backend().url
        self.aclient = stream_tail.async_client(self.url)
        self.subs: set[LiveConsumer] = set()
        self.watched: dict[tuple[str, int], int] = {}
        self.tailers: dict[tuple[str, int], asyncio.Task[None]] = {}
        self.closed: set[tuple[str, int]] = set()
        self.ready = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._pending: Change | None = None
        self.views = Views()

    # ------------------------------------------------------------ relay
    def subscribe(self, consumer: LiveConsumer) -> None:
        self.subs.add(consumer)
        if not self._tasks:
            self._tasks = [asyncio.ensure_future(self._relay()), asyncio.ensure_future(self._maintain())]

    def unsubscribe(self, consumer: LiveConsumer) -> None:
        self.subs.discard(consumer)
        self.views.unsubscribe(consumer)

    async def _relay(self) -> None:
        while True:
            try:
                async for ch in events.listen(self.aclient, ready=self.ready):
                    if self._pending is None:
                        self._pending = ch
                        asyncio.get_running_loop().call_later(RELAY_WINDOW_S, self._flush)
                    else:
                        self._pending.merge(ch)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # Valkey restarts etc.: resubscribe; pages catch up on their safety refresh
                self.ready.clear()
                log.warning("event relay lost its subscription (%s); retrying", e)
                await asyncio.sleep(1.0)
                await events.refresh_slots(self.aclient)  # after a failover: subscribe on the promoted node

    def _flush(self) -> None:
        ch, self._pending = self._pending, None
        if ch:
            asyncio.ensure_future(self._dispatch(ch))

    async def _dispatch(self, ch: Change) -> None:
        # Claims and creates name executions only; a page following a flow (or any other id) also wants
        # to hear about its members, so look their flow ids up once per window — only if someone listens.
        if ch.ids and any(not _is_eid(t) and t not in COLLECTIONS for c in self.subs for t in c.topics):
            eids = [e for e in sorted(ch.ids)[:events.MAX_IDS] if _is_eid(e)]
            pipe = self.aclient.pipeline(transaction=False)
            for e in eids:
                pipe.hget(ExecKeys(e).core, "flow_id")
            try:
                ch.flows |= {text(f) for f in await pipe.execute() if f}
            except Exception as e:  # a lost lookup only means a coarser refresh
                log.debug("flow lookup failed: %s", e)
        self.dispatch(ch)

    def dispatch(self, ch: Change) -> None:
        topics = topics_for(ch)
        self.views.changed(topics, ch.ids, BROAD in topics)
        for c in list(self.subs):
            hit = c.topics if BROAD in topics else c.topics & topics
            if hit:
                c.notify(hit, ch.created, ch.ids, ch.more)

    # ------------------------------------------------------------ stream tailers
    async def watch(self, eid: str, i: int) -> bool:
        """A local viewer follows stream i; returns False when this process has no tailer slot left."""
        key = (eid, i)
        self.watched[key] = self.watched.get(key, 0) + 1
        if not self._tasks:
            self._tasks = [asyncio.ensure_future(self._relay()), asyncio.ensure_future(self._maintain())]
        await stream_tail.mark_wanted(self.aclient, eid, i)
        return await self._ensure_tailer(key)

    def unwatch(self, eid: str, i: int) -> None:
        key = (eid, i)
        n = self.watched.get(key, 0) - 1
        if n <= 0:
            self.watched.pop(key, None)
        else:
            self.watched[key] = n

    async def _maintain(self) -> None:
        while True:
            await asyncio.sleep(MAINTAIN_S)
            for eid, i in list(self.watched):
                try:
                    await stream_tail.mark_wanted(self.aclient, eid, i)
                    await self._ensure_tailer((eid, i))
                except Exception as e:
                    log.warning("stream %s/%d: %s", eid, i, e)

    async def _ensure_tailer(self, key: tuple[str, int]) -> bool:
        t = self.tailers.get(key)
        if (t is not None and not t.done()) or key in self.closed:
            return True
        if sum(1 for t in self.tailers.values() if not t.done()) >= MAX_TAILERS:
            return False
        lock = stream_tail.TailLock(self.aclient, *key)
        if await lock.acquire():  # else another process's tailer serves the group
            self.tailers[key] = asyncio.ensure_future(self._tail(key, lock))
        return True

    async def _tail(self, key: tuple[str, int], lock: stream_tail.TailLock) -> None:
        eid, i = key
        layer = get_channel_layer()
        group = stream_group(eid, i)
        conn = stream_tail.async_client(self.url, timeout_s=stream_tail.TAIL_BLOCK_MS / 1000 + 5)
        idle = 0
        try:
            start = await stream_tail.last_id(self.aclient, eid, i)
            async for batch in stream_tail.follow(self.aclient, conn, eid, i, start):
                if batch.frames or batch.closed_at:
                    idle, sent = 0, time.monotonic()
                    pairs = render_frames(eid, i, batch.frames)
                    await layer.group_send(group, {
                        "type": "stream.batch", "prev": batch.prev, "frames": pairs, "text": frames_message(pairs),
                        "closed_at": batch.closed_at, "closed_reason": batch.closed_reason})
                    if batch.closed_at:
                        if len(self.closed) > 10_000:  # only a guard against re-tailing: forgetting is safe
                            self.closed.clear()
                        self.closed.add(key)
                        return
                    # A fast writer (a batch of several frames): at most one batch per BATCH_INTERVAL_S, its frames
                    # gathering in the stream meanwhile, so viewers get a few messages a second, not one per
                    # frame. A slow writer's next frame goes out as soon as it comes (QUICK_INTERVAL_S apart).
                    gap = QUICK_INTERVAL_S if len(batch.frames) <= QUICK_BATCH_FRAMES else BATCH_INTERVAL_S
                    await asyncio.sleep(max(0.0, sent + gap - time.monotonic()))
                    continue
                # A heartbeat (about once per TAIL_BLOCK_MS): keep the lock, stop when nobody watches.
                if not await lock.renew():
                    return  # another tailer took over
                idle += 1
                if idle % 3 == 0 and key not in self.watched and not await lock.wanted():
                    return
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("tailer of %s/%d failed", eid, i)
        finally:
            with contextlib.suppress(Exception):
                await lock.release()
            with contextlib.suppress(Exception):
                await conn.aclose()


    async def close(self) -> None:
        """Stop the relay, the maintenance loop and this process's tailers (tests; shutdown)."""
        await self.views.close()
        tasks = [*self._tasks, *self.tailers.values()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks, self.tailers = [], {}
        await self.aclient.aclose()


_hubs: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Hub] = weakref.WeakKeyDictionary()


def hub() -> Hub:
    """The hub of the running event loop (daphne runs one; each test's loop gets its own)."""
    loop = asyncio.get_running_loop()
    h = _hubs.get(loop)
    if h is None:
        h = _hubs[loop] = Hub()
    return h

