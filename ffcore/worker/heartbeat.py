"""Live-worker registry: each worker process heartbeats a hash `ff:worker:<wiid>` (TTL'd) and sits in
`ff:idx:workers`; capabilities go to `ff:worker:<wiid>:caps` before the index SADD (the order the
upstream unblock scanner relies on). Readers list live workers without scanning the keyspace.

A worker's life as readers see it (`roster`): **live** while its heartbeat is at most `LATE_BEATS` intervals
old; **stale** once it is later than that, for as long as its registration (the hash, kept for the alive
key's time: twice the lease TTL) lasts, its leases still listed; then **gone**, for an hour
(`ff:worker:<wiid>:seen` holds its last heartbeat), after which it is no longer listed.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from typing import Any

from ffcore import keys, metrics
from ffcore.backend import Backend
from ffcore.errors import ConfigError
from ffcore.keys import ExecKeys
from ffcore.reads import decode_map, text


def alive_key(wiid: str) -> str:
    return keys.worker(wiid) + ":alive"


#: A heartbeat older than this many intervals makes the worker stale (the registry hash used to expire then).
LATE_BEATS = 3
#: How long a vanished worker stays listed as "gone".
GONE_KEEP_MS = 3_600_000
#: Interval assumed for registry entries written before the hash carried its own.
DEFAULT_INTERVAL_MS = 2_000


@dataclass(frozen=True)
class WorkerInfo:
    worker_instance_id: str
    fields: dict[str, str]

    @property
    def lanes(self) -> list[str]:
        return [x for x in self.fields.get("lanes", "").split(",") if x]

    @property
    def capabilities(self) -> list[str]:
        return [x for x in self.fields.get("capabilities", "").split(",") if x]

    @property
    def leases(self) -> list[str]:
        try:
            v = json.loads(self.fields.get("leases", "[]"))
        except ValueError:
            return []
        return [str(x) for x in v] if isinstance(v, list) else []

    @property
    def in_flight(self) -> int:
        return int(self.fields.get("in_flight") or 0)

    @property
    def last_heartbeat_at(self) -> int:
        return int(self.fields.get("last_heartbeat_at") or 0)

    @property
    def interval_ms(self) -> int:
        return int(self.fields.get("heartbeat_interval_ms") or DEFAULT_INTERVAL_MS)

    def status(self, now_ms: int) -> str:
        """"live", "stale" (heartbeat late, registration still held) or "gone" (registration expired)."""
        if not self.fields.get("worker_instance_id"):
            return "gone"
        return "live" if now_ms - self.last_heartbeat_at <= LATE_BEATS * self.interval_ms else "stale"

    def stale_since(self) -> int:
        """When the heartbeat became late (ms)."""
        return self.last_heartbeat_at + LATE_BEATS * self.interval_ms


class Heartbeat:
    """Writes one worker's registry entry; `beat()` refreshes it (call every interval)."""

    def __init__(self, backend: Backend, *, worker_id: str, wiid: str, lanes: tuple[str, ...],
                 capabilities_csv: str, concurrency: int, interval_ms: int, lease_ttl_ms: int) -> None:
        self.backend = backend
        self.wiid = wiid
        self.interval_ms = interval_ms
        self.lease_ttl_ms = lease_ttl_ms
        self.static = {
            "worker_id": worker_id, "worker_instance_id": wiid, "lanes": ",".join(lanes),
            "capabilities": capabilities_csv, "concurrency": str(concurrency),
            "host": socket.gethostname(), "pid": str(os.getpid()),
        }
        self.caps = capabilities_csv

    def register(self) -> None:
        c = self.backend.client
        if not c.set(alive_key(self.wiid), "1", nx=True, px=max(2 * self.lease_ttl_ms, 1000)):
            raise ConfigError(f"duplicate worker_instance_id {self.wiid!r}: another live process uses it")
        now = self.backend.now_ms()
        c.hset(keys.worker(self.wiid), mapping={**self.static, "started_at": str(now)})
        self.advertise([])

    def advertise(self, leases: list[str]) -> None:
        """Announce this worker and its capabilities without the duplicate-id check of `register`: for
        programs that claim by themselves (`Worker.claim_next`) instead of running `Worker.run()`. The
        route-blocked executions that need these capabilities are released for it."""
        c = self.backend.client
        if self.caps:
            c.set(keys.worker_caps(self.wiid), self.caps)
        else:
            c.delete(keys.worker_caps(self.wiid))
        self.beat(leases)

    def beat(self, leases: list[str]) -> None:
        now = self.backend.now_ms()
        ttl = 3 * self.interval_ms
        pipe = self.backend.client.pipeline(transaction=False)
        wk = keys.worker(self.wiid)
        registration = max(2 * self.lease_ttl_ms, ttl)
        pipe.hset(wk, mapping={**self.static, "in_flight": str(len(leases)), "leases": json.dumps(leases),
                               "last_heartbeat_at": str(now), "heartbeat_interval_ms": str(self.interval_ms)})
        # The record outlives a late heartbeat (readers show the worker as stale, with its leases) for as long
        # as its registration (the alive key) holds.
        pipe.pexpire(wk, registration)
        pipe.set(alive_key(self.wiid), "1", px=registration)
        pipe.set(keys.worker_seen(self.wiid), str(now), px=registration + GONE_KEEP_MS)
        pipe.sadd(keys.WORKERS_INDEX, self.wiid)
        metrics.recorder.drain_into(pipe)  # this process's counts ride along (no round trip of their own)
        pipe.execute()

    def unregister(self) -> None:
        pipe = self.backend.client.pipeline(transaction=False)
        pipe.srem(keys.WORKERS_INDEX, self.wiid)
        for key in (keys.worker(self.wiid), alive_key(self.wiid), keys.worker_caps(self.wiid),
                    keys.worker_seen(self.wiid)):
            pipe.delete(key)  # one DEL per key: a cluster pipeline refuses a DEL across slots
        metrics.recorder.drain_into(pipe)  # the last counts of a stopping worker
        pipe.execute()


def roster(backend: Backend) -> tuple[int, list[WorkerInfo]]:
    """Our registry (ffcore.workers also reads an upstream deployment's): the server's now (ms) and every
    registered worker — live, stale or gone (a vanished worker stays an hour; its fields then hold only
    `last_heartbeat_at`) — live first, then by newest heartbeat."""
    ids = sorted(text(x) for x in backend.client.smembers(keys.WORKERS_INDEX))
    pipe = backend.client.pipeline(transaction=False)
    for wiid in ids:
        pipe.hgetall(keys.worker(wiid))
        pipe.get(keys.worker_seen(wiid))
    now, got = backend.execute_timed(pipe)
    out: list[WorkerInfo] = []
    for i, wiid in enumerate(ids):
        fields: dict[str, Any] = decode_map(got[2 * i])
        seen = text(got[2 * i + 1])
        if fields:
            out.append(WorkerInfo(wiid, fields))
        elif seen.isdigit():
            out.append(WorkerInfo(wiid, {"last_heartbeat_at": seen}))
    order = {"live": 0, "stale": 1, "gone": 2}
    return now, sorted(out, key=lambda w: (order[w.status(now)], -w.last_heartbeat_at))


def lease_expiries(backend: Backend, eids: list[str]) -> dict[str, int]:
    """`lease_expires_at` (ms, 0 when none) of the executions a worker lists as leased."""
    if not eids:
        return {}
    pipe = backend.client.pipeline(transaction=False)
    valid = []
    for e in eids:
        try:
            k = ExecKeys(e)
        except ValueError:
            continue  # not an execution id: nothing to read
        pipe.hget(k.core, "lease_expires_at")
        valid.append(e)
    vals = pipe.execute() if valid else []
    return {e: int(text(v) or 0) if text(v).isdigit() else 0 for e, v in zip(valid, vals, strict=True)}
