"""Prunes the worker index `ff:idx:workers`.

A worker's registration expires on its own (the hash and the alive key after their TTL, then an hour later the
`seen` key that keeps it listed as gone), but its id stayed in the index, so the set grew by one id per worker
process that ever stopped without unregistering. An id whose hash, alive key and `seen` key are all gone has been
gone longer than the roster's "gone" window (`heartbeat.GONE_KEEP_MS`): no reader lists it any more, and it is
removed here.

The check and the SREM are not atomic (the keys of one worker do not share a slot with the index): a worker
that re-registers the same id in between is back in the index at its next heartbeat, which SADDs every beat.
"""

from __future__ import annotations

from ffcore import keys
from ffcore.backend import Backend
from ffcore.reads import text
from ffcore.worker.heartbeat import alive_key

from .base import Scanner

#: Index members checked per SSCAN page.
PAGE = 200


def prune_worker_index(backend: Backend, page: int = PAGE) -> int:
    """Remove from the worker index every id with no registration left (hash, alive key, `seen`); returns how
    many were removed."""
    c = backend.client
    removed = 0
    cursor = 0
    while True:
        cursor, members = c.sscan(keys.WORKERS_INDEX, cursor, count=page)
        ids = [text(m) for m in members]
        if ids:
            pipe = c.pipeline(transaction=False)
            for wiid in ids:
                # One EXISTS per key: a cluster pipeline refuses one command across slots.
                for key in (keys.worker(wiid), alive_key(wiid), keys.worker_seen(wiid)):
                    pipe.exists(key)
            found = pipe.execute()
            vanished = [w for i, w in enumerate(ids) if not any(found[3 * i:3 * i + 3])]
            if vanished:
                removed += int(c.srem(keys.WORKERS_INDEX, *vanished))
        if int(cursor) == 0:
            return removed


class WorkerIndexPruner(Scanner):
    """Runs `prune_worker_index` once a minute (the index is one key: no partitions to visit)."""

    interval_ms: int = 60_000
    name: str = "worker_index_pruner"

    def tick(self) -> int:
        n = prune_worker_index(self.backend, self.batch)
        self.stats.ticks += 1
        self.stats.acted += n
        self.stats.last_tick_ms = self.backend.now_ms()
        return n
