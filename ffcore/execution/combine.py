"""Automatic pipelining of concurrent plain creates (issue #21, S1-threads).

Threads of one process that call `Client.create()` at the same moment (a web app's request handlers)
share round trips: the first caller with nothing in flight sends its create at once, alone — a single
thread pays nothing extra — and the creates queued meanwhile by other threads go out together in the
next round trip, sent by the first of them (a leader hand-off, as the worker's group commit does), so
no caller waits for more than the round trip in flight and its own. A batch is one `create_many` of
plain creates: one pipeline, one wake per lane. Each caller gets its own result or its own error.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")

#: Most creates one round trip carries (the rest go in the next).
MAX_BATCH = 128


class _Slot(Generic[T, R]):
    __slots__ = ("item", "done", "lead", "outcome")

    def __init__(self, item: T) -> None:
        self.item = item
        self.done = threading.Event()
        self.lead = False
        self.outcome: R | BaseException | None = None


class Combiner(Generic[T, R]):
    """Runs `send(items)` (one outcome per item: a result or the exception for that item) for the items
    submitted while an earlier batch was in flight, as one batch."""

    def __init__(self, send: Callable[[list[T]], Sequence[R | BaseException]]) -> None:
        self._send = send
        self._lock = threading.Lock()
        self._queue: list[_Slot[T, R]] = []
        self._leading = False

    def submit(self, item: T) -> R:
        slot: _Slot[T, R] = _Slot(item)
        with self._lock:
            self._queue.append(slot)
            lead = not self._leading
            self._leading = True
        if not lead:
            slot.done.wait()
            lead = slot.lead
        if lead:
            self._run_batch()  # our slot heads the queue: it is in this batch
        out = slot.outcome
        if isinstance(out, BaseException):
            raise out
        return out  # type: ignore[return-value]  # set (not an exception) by _run_batch

    def _run_batch(self) -> None:
        with self._lock:
            batch, self._queue = self._queue[:MAX_BATCH], self._queue[MAX_BATCH:]
        outs: Sequence[R | BaseException]
        try:
            outs = list(self._send([s.item for s in batch]))
            if len(outs) != len(batch):
                raise RuntimeError(f"{len(outs)} outcomes for {len(batch)} items")
        except BaseException as e:  # the round trip failed: every caller in it gets the error
            outs = [e] * len(batch)
        with self._lock:  # the next queued caller leads the next batch (or nobody is waiting)
            nxt = self._queue[0] if self._queue else None
            if nxt is None:
                self._leading = False
            else:
                nxt.lead = True
        for s, o in zip(batch, outs, strict=True):
            s.outcome = o
            s.done.set()
        if nxt is not None:
            nxt.done.set()
