"""The upstream-mode reconciler: keeps the indexes pages need that upstream does not keep, in keys of our own
(`ff:up:…`, ffcore/keys.py), from upstream's own sets — never writing a key upstream's library or services own.

Kept: per flow partition the newest-first execution index (`up_created`, from `ff:idx:{fp:N}:all_executions`,
scored by the core's `created_at`) and flow index (`up_flows`, from `flow_index`); the lane registry
(`UP_LANES`, `up_lane_partitions`) and the namespaces seen (`UP_NAMESPACES`, where the v0.14 worker registries
are read).

Live hints (upstream publishes no `ff:events`): the same pipeline reads, per partition, the sizes of the lease
expiry and suspension timeout indexes and the signal-delivery stream's entries since the last tick; a change
there, or an index entry added or dropped, is published on our `ff:events` channel (a PUBLISH, no key) with the
execution ids it names, so live pages refresh the way they do on our own deployment. Flow members' terminal
transitions also arrive on upstream's `ff:dag:completions`, which the dashboard's relay already follows.

Cost: every tick compares the sizes of upstream's set and our index per partition — 4 commands per partition in
one pipeline (SCARD/ZCARD twice), nothing else when they agree. A partition whose sizes differ is walked: SSCAN
of upstream's set, ZMSCORE against ours, HMGET of the new cores; then our index in ZRANGE slices, SMISMEMBER
against upstream's set, ZREM of what upstream no longer holds. The walk of one tick stops after `budget`
entries and resumes where it stopped, so a deployment with millions of executions catches up over several
ticks without one long stall. Every `sweep_every` ticks every partition is walked even when the sizes agree
(a delete and a create between two ticks leave them equal).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import events, keys
from ..keys import ExecKeys, FlowKeys, PartitionKeys
from ..reads import text

if TYPE_CHECKING:
    from ..backend import Backend

log = logging.getLogger("ffcore.upstream")


#: Commands per partition in a tick's one pipeline.
PER_PARTITION = 7
#: Signal-delivery entries read per partition per tick (more in one tick still publishes a hint).
PROBE_ENTRIES = 100


def _field(entry: Any, name: str) -> Any:
    """A field of an XRANGE entry `(id, fields)` (fields a dict or a flat list, depending on the client)."""
    fields = entry[1]
    if isinstance(fields, dict):
        return fields.get(name.encode(), fields.get(name))
    pairs = list(fields)
    for i in range(0, len(pairs) - 1, 2):
        if text(pairs[i]) == name:
            return pairs[i + 1]
    return None


@dataclass
class _Walk:
    """Where one partition's walk stands: SSCAN cursor of the add phase, then ZRANGE offset of the drop phase."""

    cursor: int = 0
    dropping: bool = False
    offset: int = 0
    #: Members of upstream's set this walk could not index (no record: an id left behind by a purge).
    skipped: int = 0


@dataclass
class Reconciler:
    backend: Backend
    interval_ms: int = 2000
    #: Entries examined per SSCAN / ZRANGE slice.
    batch: int = 500
    #: Entries examined per tick across every partition (the walk resumes on the next tick).
    budget: int = 20_000
    #: Walk every partition every this many ticks, even where the sizes agree.
    sweep_every: int = 30
    ticks: int = 0
    _walks: dict[tuple[str, int], _Walk] = field(default_factory=dict)
    #: Per partition: sizes of all_executions, lease_expiry, suspension_timeout at the last tick.
    _sizes: dict[int, tuple[int, int, int]] = field(default_factory=dict)
    #: Per partition: the newest signal-delivery entry id seen.
    _delivered: dict[int, str] = field(default_factory=dict)
    #: Per (kind, partition): members of upstream's set without a record at the last complete walk; sizes that
    #: differ by exactly these are in step (otherwise such a leftover would have the partition walked every tick).
    _unindexable: dict[tuple[str, int], int] = field(default_factory=dict)

    def tick(self) -> int:
        """One pass; returns how many index entries were added or dropped."""
        p = self.backend.settings.partitions.flow
        c = self.backend.client
        pipe = c.pipeline(transaction=False)
        for n in range(p):
            ix = PartitionKeys(n)
            pipe.scard(ix.all_executions)
            pipe.zcard(keys.up_created(n))
            pipe.scard(ix.flow_index)
            pipe.zcard(keys.up_flows(n))
            pipe.zcard(ix.lease_expiry)
            pipe.zcard(ix.suspension_timeout)
            last = self._delivered.get(n)
            pipe.execute_command("XREVRANGE", ix.signal_delivery, "+", f"({last}" if last else "-",
                                 "COUNT", PROBE_ENTRIES)
        sizes = pipe.execute()
        sweep = self.ticks % self.sweep_every == 0
        hinted: set[str] = set()
        moved = False
        for n in range(p):
            a, b, f, g, leases, suspended, delivered = sizes[PER_PARTITION * n: PER_PARTITION * (n + 1)]
            seen = (int(a), int(leases), int(suspended))
            moved |= self.ticks > 0 and self._sizes.get(n) != seen
            self._sizes[n] = seen
            if delivered:
                if self.ticks > 0:  # the first tick only learns where the streams stand
                    hinted |= {text(_field(e, "execution_id")) for e in delivered} - {""}
                self._delivered[n] = text(delivered[0][0])
            if sweep or int(a) != int(b) + self._unindexable.get(("x", n), 0):
                self._walks.setdefault(("x", n), _Walk())
            if sweep or int(f) != int(g) + self._unindexable.get(("f", n), 0):
                self._walks.setdefault(("f", n), _Walk())
        budget, changed, walked = self.budget, 0, bool(self._walks)
        for what, n in sorted(self._walks):
            if budget <= 0:
                break
            walk = self._walks[(what, n)]
            step = self._step_executions if what == "x" else self._step_flows
            while budget > 0:
                examined, done, acted = step(n, walk)
                budget -= max(examined, 1)
                changed += acted
                if done:
                    self._unindexable[(what, n)] = walk.skipped
                    del self._walks[(what, n)]
                    break
        if moved or hinted or changed:
            events.publish(self.backend, ids=sorted(hinted)[:events.MAX_IDS],
                           topics=["overview", "executions", "waitpoints", "flows"])
        self.ticks += 1
        if walked and not self._walks:  # every walk of this pass is done: the lists are complete
            c.hset(keys.UP_RECONCILE_STATUS, mapping={"pass_at": self.backend.now_ms(), "ticks": self.ticks})
        return changed

    def run_until(self, stop: threading.Event) -> None:
        """Tick every `interval_ms` until `stop`; a failed tick is logged and retried on the next."""
        while not stop.is_set():
            try:
                self.tick()
            except Exception:  # noqa: BLE001 - the loop must outlive one bad tick (Valkey restarting, ...)
                log.exception("upstream reconciler tick failed")
            stop.wait(self.interval_ms / 1000)

    # -- one slice of a walk: (entries examined, walk finished, entries added or dropped)
    def _step_executions(self, n: int, walk: _Walk) -> tuple[int, bool, int]:
        return self._step(n, walk, PartitionKeys(n).all_executions, keys.up_created(n), self._add_executions)

    def _step_flows(self, n: int, walk: _Walk) -> tuple[int, bool, int]:
        return self._step(n, walk, PartitionKeys(n).flow_index, keys.up_flows(n), self._add_flows)

    def _step(self, n: int, walk: _Walk, theirs: str, ours: str,
              add: Callable[[int, list[str]], tuple[int, int]]) -> tuple[int, bool, int]:
        c = self.backend.client
        if not walk.dropping:
            cursor, raw = c.sscan(theirs, walk.cursor, count=self.batch)
            members = [text(m) for m in raw]
            walk.cursor = int(cursor)
            acted = 0
            if members:
                scores = c.execute_command("ZMSCORE", ours, *members)
                missing = [m for m, s in zip(members, scores, strict=True) if s is None]
                if missing:
                    acted, skipped = add(n, missing)
                    walk.skipped += skipped
            walk.dropping = walk.cursor == 0
            return len(members), False, acted
        chunk = [text(m) for m in c.zrange(ours, walk.offset, walk.offset + self.batch - 1)]
        if not chunk:
            return 0, True, 0
        held = c.execute_command("SMISMEMBER", theirs, *chunk)
        gone = [m for m, h in zip(chunk, held, strict=True) if not h]
        if gone:
            c.zrem(ours, *gone)
        walk.offset += len(chunk) - len(gone)
        return len(chunk), len(chunk) < self.batch, len(gone)

    def _add_executions(self, n: int, eids: list[str]) -> tuple[int, int]:
        """Index these (added, skipped for want of a record)."""
        c = self.backend.client
        pipe = c.pipeline(transaction=False)
        valid = []
        for e in eids:
            try:
                k = ExecKeys(e)
            except ValueError:
                continue  # not an execution id: nothing a page could show
            pipe.hmget(k.core, ["created_at", "lane_id", "namespace"])
            valid.append(e)
        created: dict[str, int] = {}
        lanes: set[str] = set()
        namespaces: set[str] = set()
        for e, (at, lane, ns) in zip(valid, pipe.execute() if valid else [], strict=True):
            if at is None:
                continue  # purged while we looked
            created[e] = int(text(at) or 0)
            lanes.add(text(lane) or "default")
            if text(ns):
                namespaces.add(text(ns))
        if not created:
            return 0, len(eids)
        pipe = c.pipeline(transaction=False)
        pipe.zadd(keys.up_created(n), created)
        pipe.sadd(keys.UP_LANES, *lanes)
        for lane in lanes:
            pipe.sadd(keys.up_lane_partitions(lane), n)
        if namespaces:
            pipe.sadd(keys.UP_NAMESPACES, *namespaces)
        pipe.execute()
        return len(created), len(eids) - len(created)

    def _add_flows(self, n: int, fids: list[str]) -> tuple[int, int]:
        c = self.backend.client
        pipe = c.pipeline(transaction=False)
        for f in fids:
            pipe.hmget(FlowKeys(n, f).core, ["created_at", "namespace"])
        created: dict[str, int] = {}
        namespaces: set[str] = set()
        for f, (at, ns) in zip(fids, pipe.execute(), strict=True):
            if at is not None:
                created[f] = int(text(at) or 0)
                if text(ns):
                    namespaces.add(text(ns))
        if created:
            pipe = c.pipeline(transaction=False)
            pipe.zadd(keys.up_flows(n), created)
            if namespaces:
                pipe.sadd(keys.UP_NAMESPACES, *namespaces)
            pipe.execute()
        return len(created), len(fids) - len(created)


def reconcile_once(backend: Backend) -> int:
    """Bring the `ff:up:` indexes up to date now (tests, and the first page load of a fresh dashboard)."""
    r = Reconciler(backend, budget=1 << 62)
    return r.tick()


def serve(backend: Backend, *, interval_ms: int = 2000) -> None:
    """Run the reconciler until SIGTERM/SIGINT (`manage.py ffupindex`, started by `up` in upstream mode)."""
    import signal

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    Reconciler(backend, interval_ms=interval_ms).run_until(stop)
