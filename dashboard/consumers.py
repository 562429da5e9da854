"""Websocket consumers: the live tail of an attempt stream, and the server-rendered live sections of a page.

Both refuse anonymous users (the session comes from `AuthMiddlewareStack`; the origin is checked by
`OwnOriginOnly` in asgi.py; `SessionGuard` closes them when the session ends) and stay thin: the work is
in `dashboard.live` and ffcore.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.template.loader import render_to_string

from ffcore.errors import InvalidId, InvalidInput
from ffcore.ids import ExecutionId
from ffcore.streams import tail as stream_tail
from ffcore.streams.streams import check_id, id_key

from . import live
from .access import is_operator
from .ws_session import SessionGuard

log = logging.getLogger("dashboard.live")

#: Close codes (4000–4999 are ours): not signed in, bad request.
UNAUTHORIZED, BAD_REQUEST = 4401, 4400
#: Frames sent when a viewer opens without a cursor, and at most per catch-up read.
OPEN_FRAMES, CATCH_UP_PAGE = 200, 1000
#: Minimum seconds between two pushes to one socket (so at most ~4 per second).
PUSH_INTERVAL_S = 0.25
#: Topics one socket may follow, and their shape (ids, collection names).
MAX_TOPICS = 32
_TOPIC = re.compile(r"^[A-Za-z0-9_.:{}\-]{1,200}\Z")


def _query(scope: dict[str, Any]) -> dict[str, str]:
    qs = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    return {k: v[-1] for k, v in qs.items()}


class QuietSocket(AsyncJsonWebsocketConsumer):
    """A send to a socket that closed meanwhile (a push racing the viewer's tab closing) is dropped quietly:
    daphne raises `autobahn.exception.Disconnected` there, which used to surface as a traceback in `up`."""

    async def send(self, text_data: str | None = None, bytes_data: bytes | None = None, close: bool = False) -> None:
        try:
            await super().send(text_data=text_data, bytes_data=bytes_data, close=close)
        except Exception as e:  # the socket is gone; its disconnect handler cleans up
            log.debug("push to a closed socket dropped: %r", e)


class StreamConsumer(SessionGuard, QuietSocket):
    """Frames of one attempt stream, in order, with no gaps or duplicates across reconnects.

    `?after=<id>` resumes after the viewer's last frame; without it the newest `OPEN_FRAMES` are sent.
    Group messages from the stream's single tailer carry `prev` (the id read after): a `prev` newer than
    our cursor means a gap we fill with a range read; frames at or before our cursor are duplicates.
    """

    eid: str
    attempt: int
    cursor: str
    group: str = ""
    watching: bool = False
    closed_sent: bool = False

    async def connect(self) -> None:
        if not self.scope["user"].is_authenticated:
            await self.close(code=UNAUTHORIZED)
            return
        kw = self.scope["url_route"]["kwargs"]
        after = _query(self.scope).get("after") or None
        try:
            self.eid, self.attempt = ExecutionId(kw["eid"]), int(kw["attempt"])
            if after:
                check_id(after, "after")
        except (InvalidId, InvalidInput, ValueError):
            await self.close(code=BAD_REQUEST)
            return
        await self.accept()
        # Join first, read second: batches published meanwhile queue up and are filtered by the cursor.
        self.group = live.stream_group(self.eid, self.attempt)
        await self.channel_layer.group_add(self.group, self.channel_name)
        h = live.hub()
        if after:
            self.cursor = after
            got = await self._catch_up(None)
        else:
            got = await stream_tail.read_latest(h.aclient, self.eid, self.attempt, OPEN_FRAMES)
            self.cursor = "0-0"
            await self._send_frames(live.render_frames(self.eid, self.attempt, got.frames))
        if got.closed_at:
            await self._send_closed(got.closed_at, got.closed_reason)
            return
        self.watching = True
        if not await h.watch(self.eid, self.attempt):
            await self.send_json({"type": "notice", "text": "The server follows too many streams right now; "
                                                            "new frames appear when a slot frees."})

    async def _catch_up(self, until: str | None) -> Any:
        """Send every frame after our cursor (up to `until` inclusive); returns the last read (close marker)."""
        h = live.hub()
        while True:
            got = await stream_tail.read_after(h.aclient, self.eid, self.attempt, self.cursor,
                                               to_id=until or "+", count=CATCH_UP_PAGE)
            await self._send_frames(live.render_frames(self.eid, self.attempt, got.frames))
            if len(got.frames) < CATCH_UP_PAGE:
                return got

    async def _send_frames(self, pairs: list[list[str]]) -> None:
        fresh = [p for p in pairs if id_key(p[0]) > id_key(self.cursor)]
        if not fresh:
            return
        self.cursor = fresh[-1][0]
        await self.send_json({"type": "frames", "first": fresh[0][0], "last": self.cursor,
                              "html": "".join(p[1] for p in fresh)})

    async def _send_closed(self, closed_at: str, reason: str) -> None:
        if self.closed_sent:
            return
        self.closed_sent = True
        html = render_to_string("dashboard/stream.html#closed", {"reason": reason, "closed_at": closed_at})
        await self.send_json({"type": "closed", "reason": reason, "html": html})
        self._unwatch()

    # ------------------------------------------------------------ group events
    async def stream_batch(self, event: dict[str, Any]) -> None:
        if event["frames"] and event["prev"] == self.cursor:
            # The usual case: the batch continues exactly where we are; forward the prebuilt message.
            self.cursor = event["frames"][-1][0]
            await self.send(text_data=event["text"])
        else:
            if id_key(event["prev"]) > id_key(self.cursor):
                await self._catch_up(event["prev"])  # a gap: frames between our cursor and the batch
            await self._send_frames(event["frames"])
        if event.get("closed_at"):
            await self._send_closed(event["closed_at"], event.get("closed_reason", ""))

    def _unwatch(self) -> None:
        if self.watching:
            self.watching = False
            live.hub().unwatch(self.eid, self.attempt)

    async def disconnect(self, code: int) -> None:
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)
        self._unwatch()


class LiveConsumer(SessionGuard, QuietSocket):
    """Pushes the live sections of one page, rendered on the server (`dashboard.live_views`), and hints.

    After connecting, the page sends `{"views": [{"id", "url", "topics", "mode", "every"}...]}`: the
    sections it shows. Each is rendered once per process per change (at most once a second) and arrives
    as `{"type": "view", "id", "mode", "html"}` — the page swaps it in around what the operator is typing.
    `?topics=a,b` names topics for hint-driven elements (the "N new" banner, the flow graph):
    `{"type": "refresh", "topics": [...], "created": {...}}`, coalesced to one per `PUSH_INTERVAL_S`.
    `{"pause": true}` from the page (a tab in the background) holds pushes; `{"pause": false}` sends what
    accumulated, once.
    """

    topics: frozenset[str] = frozenset()
    operator: bool = False
    user: Any = None
    host: str = ""

    async def connect(self) -> None:
        self.user = self.scope["user"]
        if not self.user.is_authenticated:
            await self.close(code=UNAUTHORIZED)
            return
        raw = [t for t in _query(self.scope).get("topics", "").split(",") if t]
        if len(raw) > MAX_TOPICS or not all(_TOPIC.match(t) for t in raw):
            await self.close(code=BAD_REQUEST)
            return
        self.topics = frozenset(raw)
        self.operator = await database_sync_to_async(is_operator)(self.user)
        self.host = dict(self.scope.get("headers", [])).get(b"host", b"").decode("latin-1")
        self.pending: set[str] = set()
        self.created: dict[str, dict[str, int]] = {}
        self.held: dict[str, str] = {}
        self.paused = False
        self.last_push = 0.0
        self.timer: asyncio.TimerHandle | None = None
        await self.accept()
        live.hub().subscribe(self)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if not isinstance(content, dict):
            return
        if isinstance(content.get("pause"), bool):
            await self.on_pause(content["pause"])
        if isinstance(content.get("views"), list):
            self.on_views(content["views"], bool(content.get("fresh")))

    # ------------------------------------------------------------ page messages (one handler per type)
    async def on_pause(self, paused: bool) -> None:
        self.paused = paused
        if not paused:
            held, self.held = self.held, {}
            for text in held.values():
                await self.send(text_data=text)
            self._schedule()

    def on_views(self, specs: list[Any], fresh: bool) -> None:
        live.hub().views.subscribe(self, specs, fresh)

    # ------------------------------------------------------------ pushes from the hub
    def push_view(self, element: str, text: str) -> None:
        """A rendered view for one of our elements (held while the tab is in the background: newest wins)."""
        if self.paused:
            self.held[element] = text
        else:
            asyncio.ensure_future(self.send(text_data=text))

    def notify(self, topics: set[str], created: dict[str, dict[str, int]], ids: set[str] | None = None,
               more: bool = False) -> None:
        """Called by the hub's relay (same event loop) with the topics of ours that changed."""
        self.pending |= topics
        for lane, kinds in created.items():
            mine = self.created.setdefault(lane, {})
            for kind, n in kinds.items():
                mine[kind] = mine.get(kind, 0) + n
        self._schedule()

    def _schedule(self) -> None:
        if self.paused or self.timer is not None or not self.pending:
            return
        delay = max(0.0, self.last_push + PUSH_INTERVAL_S - time.monotonic())
        self.timer = asyncio.get_running_loop().call_later(delay, lambda: asyncio.ensure_future(self._push()))

    async def _push(self) -> None:
        self.timer = None
        if self.paused or not self.pending:
            return
        message: dict[str, Any] = {"type": "refresh", "topics": sorted(self.pending), "created": self.created}
        self.pending, self.created = set(), {}
        self.last_push = time.monotonic()
        await self.send_json(message)

    async def disconnect(self, code: int) -> None:
        live.hub().unsubscribe(self)
        timer = getattr(self, "timer", None)
        if timer is not None:
            timer.cancel()
