"""Live-worker registry: each worker process heartbeats a hash `ff:worker:<wiid>` (TTL'd) and sits in
`ff:idx:workers`; capabilities go to `ff:worker:<wiid>:caps` before the index SADD (the order the
upstream unblock scanner relies on). Readers list live workers without scanning the keyspace.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from typing import Any

from ffcore import keys
from ffcore.backend import Backend
from ffcore.errors import ConfigError
from ffcore.reads import decode_map, text


def alive_key(wiid: str) -> str:
    return keys.worker(wiid) + ":alive"


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
        pipe.hset(wk, mapping={**self.static, "in_flight": str(len(leases)), "leases": json.dumps(leases),
                               "last_heartbeat_at": str(now)})
        pipe.pexpire(wk, ttl)
        pipe.set(alive_key(self.wiid), "1", px=max(2 * self.lease_ttl_ms, ttl))
        pipe.sadd(keys.WORKERS_INDEX, self.wiid)
        pipe.execute()

    def unregister(self) -> None:
        pipe = self.backend.client.pipeline(transaction=False)
        pipe.srem(keys.WORKERS_INDEX, self.wiid)
        for key in (keys.worker(self.wiid), alive_key(self.wiid), keys.worker_caps(self.wiid)):
            pipe.delete(key)  # one DEL per key: a cluster pipeline refuses a DEL across slots
        pipe.execute()


def list_workers(backend: Backend) -> list[WorkerInfo]:
    """Live workers (heartbeat hash still present), newest heartbeat first."""
    ids = sorted(text(x) for x in backend.client.smembers(keys.WORKERS_INDEX))
    if not ids:
        return []
    pipe = backend.client.pipeline(transaction=False)
    for wiid in ids:
        pipe.hgetall(keys.worker(wiid))
    out: list[WorkerInfo] = []
    for wiid, raw in zip(ids, pipe.execute(), strict=True):
        fields: dict[str, Any] = decode_map(raw)
        if fields:
            out.append(WorkerInfo(wiid, fields))
    return sorted(out, key=lambda w: -w.last_heartbeat_at)
