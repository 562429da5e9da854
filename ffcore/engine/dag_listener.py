"""Completion listener: SUBSCRIBE `ff:dag:completions` and resolve a finished member's outgoing edges at once.

The library PUBLISHes `{execution_id, flow_id, outcome}` when a flow member completes, fails terminally
or is cancelled. Messages arriving together are resolved as one batch. Pub/Sub is fire-and-forget: a
message published while we are disconnected is lost, and expiries and skips are never published — the
dependency reconciler covers both. The listener runs inside the scanner loop: each `tick()` listens for
up to `interval_ms` on a subscription it keeps across ticks.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import redis

from ffcore import keys
from ffcore.flows.dag import resolve_outgoing

from .base import Scanner

log = logging.getLogger("ffcore.dag_listener")

#: Messages resolved together at most.
MAX_BATCH = 500


@dataclass
class CompletionListener(Scanner):
    name: str = "dag_completions"
    interval_ms: int = 1000
    #: Set once the subscription is live (tests wait on it before publishing).
    ready: threading.Event = field(default_factory=threading.Event)
    _pubsub: Any = field(default=None, repr=False)

    def _subscribe(self) -> Any:
        if self._pubsub is None:
            ps = self.backend.client.pubsub(ignore_subscribe_messages=True)
            ps.subscribe(keys.DAG_COMPLETIONS_CHANNEL)
            self._pubsub = ps
        return self._pubsub

    def close(self) -> None:
        if self._pubsub is not None:
            try:
                self._pubsub.close()
            finally:
                self._pubsub = None
                self.ready.clear()

    def tick(self) -> int:
        deadline = time.monotonic() + self.interval_ms / 1000
        acted = 0
        try:
            ps = self._subscribe()
            while (left := deadline - time.monotonic()) > 0:
                first = ps.get_message(timeout=min(left, 0.25))
                self.ready.set()  # the SUBSCRIBE was confirmed by the first read
                if first is None:
                    continue
                batch = [first]
                while len(batch) < MAX_BATCH and (more := ps.get_message(timeout=0)) is not None:
                    batch.append(more)
                acted += self.handle(batch)
        except Exception as e:  # a broken subscription must never stay broken
            # Missed messages are the reconciler's job; resubscribe on the next tick.
            self.stats.errors += 1
            level = logging.WARNING if isinstance(e, redis.ConnectionError | redis.TimeoutError) else logging.ERROR
            log.log(level, "completion listener lost its subscription (%s); resubscribing", e)
            with contextlib.suppress(Exception):
                self.close()
            self._pubsub = None
            self.ready.clear()
            time.sleep(0.2)
        self.stats.ticks += 1
        self.stats.acted += acted
        return acted

    def handle(self, messages: list[dict[str, Any]]) -> int:
        finished = []
        for m in messages:
            if m.get("type") != "message":
                continue
            try:
                data = json.loads(m["data"])
                finished.append((str(data["execution_id"]), str(data.get("flow_id") or ""), str(data["outcome"])))
            except (ValueError, KeyError, TypeError):
                log.warning("ignoring a malformed completion message: %r", m.get("data"))
        if not finished:
            return 0
        try:
            rep = resolve_outgoing(self.backend, finished)
        except Exception:  # one bad batch must not stop the listener; the reconciler retries it
            self.stats.errors += 1
            log.exception("resolving %d completions failed", len(finished))
            return 0
        return rep.satisfied + len(rep.skipped)
