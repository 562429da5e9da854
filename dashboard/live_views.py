"""Server-rendered live views: each live section is rendered once per process and pushed to every viewer.

A page's live element (`data-live` + `data-live-url`) registers a *view* over its socket: the URL whose
htmx GET renders the element's partial, the topics it follows, and how it is swapped. Viewers of the same
URL and role (operator or viewer: the only thing partials vary by) share one `View`. When one of its topics
changes, the view is rendered once (the same Django view and partial as the page load, called in-process),
at most once per `RENDER_INTERVAL_S`, and the resulting HTML is sent to every subscriber — only if it
differs from what they have. A slow server-side tick (`SAFETY_S`, or the element's `data-live-every`)
covers writers that publish no events, so an idle tab makes no HTTP requests at all.

`rows` views (the executions list) are rendered for the execution ids a change names (`?ids=`), and
the page swaps just those rows. Partials pushed this way must not hold per-user content beyond the role.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlencode, urlsplit

from asgiref.sync import sync_to_async
from django.http import Http404
from django.test import RequestFactory
from django.urls import Resolver404, resolve
from django_htmx.middleware import HtmxDetails

if TYPE_CHECKING:
    from .consumers import LiveConsumer

log = logging.getLogger("dashboard.live")

#: At most one render per view in this window: a burst of changes costs one render, pushed once (1 s made a
#: busy list p50 ~1.1 s behind, as a change waited out the window its predecessor opened).
RENDER_INTERVAL_S = 0.5
#: A view with no pushed change is re-rendered this often anyway (pushed only if its HTML changed).
SAFETY_S = 30.0
#: Shortest server-side period a page may ask for (`data-live-every`, e.g. budget gauges every 2 s).
MIN_EVERY_S = 1.0
#: Views one process keeps at most; a socket registers at most MAX_VIEWS_PER_SOCKET.
MAX_VIEWS, MAX_VIEWS_PER_SOCKET = 2000, 16
#: Execution ids one rows render carries at most (a bigger burst re-renders the newest ones).
MAX_ROW_IDS = 100
MODES = frozenset({"swap", "inner", "rows"})
#: Where the views a page may register live.
VIEW_MODULE = "dashboard.views"


@dataclass
class View:
    path: str  #: path + query of the partial's GET
    operator: bool
    mode: str
    topics: frozenset[str]
    every_s: float
    subs: dict[LiveConsumer, str] = field(default_factory=dict)  #: consumer -> its element id
    fresh: set[LiveConsumer] = field(default_factory=set)  #: subscribers owed the next render even if unchanged
    digest: str = ""
    dirty: bool = False
    ids: set[str] = field(default_factory=set)
    last: float = 0.0
    timer: asyncio.TimerHandle | None = None
    running: bool = False


def _render_sync(path: str, user: Any, host: str) -> tuple[int, str]:
    """GET `path` as `user` through its Django view, as htmx would (the same partial as the page)."""
    parts = urlsplit(path)
    match = resolve(unquote(parts.path))
    request = RequestFactory().get(path, HTTP_HX_REQUEST="true", HTTP_HOST=host or "localhost")
    request.user = user
    request.htmx = HtmxDetails(request)  # type: ignore[attr-defined]
    try:
        response = match.func(request, *match.args, **match.kwargs)
    except Http404:  # e.g. a schedule deleted meanwhile: nothing to push, the page keeps what it shows
        return 404, ""
    if hasattr(response, "render"):
        response.render()
    return response.status_code, response.content.decode()


class Views:
    """The views of one process (owned by the hub of its event loop)."""

    def __init__(self) -> None:
        self.views: dict[tuple[str, bool], View] = {}
        self._ticker: asyncio.Task[None] | None = None

    # ------------------------------------------------------------ subscriptions
    def subscribe(self, consumer: LiveConsumer, specs: list[dict[str, Any]], fresh: bool) -> None:
        """Register the views a page shows (replacing any it registered before)."""
        self.unsubscribe(consumer)
        for spec in specs[:MAX_VIEWS_PER_SOCKET]:
            parsed = _parse(spec)
            if parsed is None:
                continue
            el, path, mode, topics, every = parsed
            key = (path, consumer.operator)
            v = self.views.get(key)
            if v is None:
                if len(self.views) >= MAX_VIEWS:
                    continue
                v = self.views[key] = View(path, consumer.operator, mode, topics, every, last=time.monotonic())
            v.subs[consumer] = el
            v.every_s = min(v.every_s, every)
            if fresh and mode != "rows":  # a reconnecting page catches up on what it missed
                v.fresh.add(consumer)
                self._schedule(v, consumer)
        if self._ticker is None:
            self._ticker = asyncio.ensure_future(self._tick())

    def unsubscribe(self, consumer: LiveConsumer) -> None:
        for key, v in list(self.views.items()):
            v.subs.pop(consumer, None)
            v.fresh.discard(consumer)
            if not v.subs:
                if v.timer is not None:
                    v.timer.cancel()
                del self.views[key]

    # ------------------------------------------------------------ changes
    def changed(self, topics: set[str], ids: set[str], broad: bool) -> None:
        """A change (already merged over the relay window) touched these topics / execution ids."""
        for v in list(self.views.values()):
            if not (broad or v.topics & topics):
                continue
            if v.mode == "rows":
                if broad or len(v.ids) + len(ids) > MAX_ROW_IDS:
                    v.ids = set(sorted(v.ids | ids)[-MAX_ROW_IDS:])
                else:
                    v.ids |= ids
                if not v.ids:
                    continue
            self._schedule(v, None)

    def _schedule(self, v: View, by: LiveConsumer | None) -> None:
        v.dirty = True
        if v.timer is not None or v.running:
            return
        delay = max(0.0, v.last + RENDER_INTERVAL_S - time.monotonic())
        v.timer = asyncio.get_running_loop().call_later(delay, lambda: asyncio.ensure_future(self._render(v, by)))

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(MIN_EVERY_S)
            now = time.monotonic()
            for v in list(self.views.values()):
                if v.mode != "rows" and now - v.last >= v.every_s:
                    self._schedule(v, None)

    async def _render(self, v: View, by: LiveConsumer | None) -> None:
        v.timer = None
        if not v.subs or not v.dirty:
            return
        v.running, v.dirty, v.last = True, False, time.monotonic()
        path, ids = v.path, sorted(v.ids)
        v.ids = set()
        if v.mode == "rows":
            path += ("&" if "?" in path else "?") + urlencode({"ids": ",".join(ids)})
        try:
            who = by if by is not None and by in v.subs else next(iter(v.subs))
            status, html = await sync_to_async(_render_sync)(path, who.user, who.host)
        except Exception:
            log.exception("live view %s failed to render", v.path)
            status, html = 500, ""
        finally:
            v.running = False
        if status == 200:
            digest = hashlib.sha1(html.encode()).hexdigest()
            changed = digest != v.digest or v.mode == "rows"
            v.digest = digest
            targets = list(v.subs) if changed else [c for c in v.subs if c in v.fresh]
            v.fresh.clear()
            texts: dict[str, str] = {}  # one JSON message per element id, shared by every tab showing it
            for c in targets:
                el = v.subs.get(c)
                if el is not None:
                    if el not in texts:
                        texts[el] = json.dumps({"type": "view", "id": el, "mode": v.mode, "html": html})
                    c.push_view(el, texts[el])
        if v.dirty and v.subs:  # changes that came in while rendering
            self._schedule(v, None)

    async def close(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(BaseException):
                await self._ticker
            self._ticker = None
        for v in self.views.values():
            if v.timer is not None:
                v.timer.cancel()
        self.views.clear()


def _parse(spec: Any) -> tuple[str, str, str, frozenset[str], float] | None:
    """(element id, path, mode, topics, every) of one view a page registers, or None when malformed."""
    if not isinstance(spec, dict):
        return None
    el, url, mode = spec.get("id"), spec.get("url"), spec.get("mode", "swap")
    topics, every = spec.get("topics"), spec.get("every") or SAFETY_S
    if not (isinstance(el, str) and 0 < len(el) <= 200 and isinstance(url, str) and url.startswith("/")
            and not url.startswith("//") and len(url) <= 2000 and mode in MODES
            and isinstance(topics, list) and 0 < len(topics) <= 32
            and all(isinstance(t, str) and 0 < len(t) <= 200 for t in topics)
            and isinstance(every, int | float)):
        return None
    try:
        match = resolve(unquote(urlsplit(url).path))
    except Resolver404:
        return None
    # Only the dashboard's own pages (whose live partials vary by role alone): never the admin or the API,
    # whose answers may differ between two users of one role.
    if not getattr(match.func, "__module__", "").startswith(VIEW_MODULE):
        return None
    return el, url, mode, frozenset(topics), max(MIN_EVERY_S, min(SAFETY_S, float(every)))
