"""Upstream v0.14+'s worker registry, read as our roster: per namespace `ff:idx:<ns>:workers` (a set, never
trimmed by TTL), `ff:worker:<ns>:<wiid>:alive` (TTL = the registration's) and the `…:caps` hash (same TTL).

Namespaces come from the reconciler's `ff:up:namespaces` (every namespace an execution was seen in) — a worker
registered in a namespace that has no execution yet is not listed. Upstream keeps no lease list per worker in
the registry and no heartbeat interval: a worker is "live" while its alive key holds and its last beat is within
one registration TTL, "stale" when its beat is older but the key still holds, "gone" once the key expired.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import keys
from ..reads import decode_map, text
from ..worker.heartbeat import LATE_BEATS, WorkerInfo

if TYPE_CHECKING:
    from ..backend import Backend


def roster(backend: Backend) -> tuple[int, list[WorkerInfo]]:
    """The server's now (ms) and every registered worker of every known namespace, live first."""
    c = backend.client
    namespaces = sorted(text(x) for x in c.smembers(keys.UP_NAMESPACES))
    pipe = c.pipeline(transaction=False)
    for ns in namespaces:
        pipe.smembers(keys.upstream_workers_index(ns))
    ids = [(ns, text(w)) for ns, members in zip(namespaces, pipe.execute() if namespaces else [], strict=True)
           for w in sorted(members)]
    pipe = c.pipeline(transaction=False)
    for ns, wiid in ids:
        pipe.pttl(keys.upstream_worker_alive(ns, wiid))
        pipe.hgetall(keys.upstream_worker_caps(ns, wiid))
    now, got = backend.execute_timed(pipe)
    out = []
    for i, (ns, wiid) in enumerate(ids):
        ttl, caps = int(got[2 * i] or -2), decode_map(got[2 * i + 1])
        last = caps.get("last_heartbeat_ms", "")
        if ttl >= 0 or ttl == -1:  # alive key held (-1: no TTL, held for good)
            ttl_ms = int(caps.get("ttl_ms") or 0) or 30_000
            fields = {"worker_instance_id": wiid, "worker_id": caps.get("worker_id", ""), "namespace": ns,
                      "lanes": caps.get("lanes_csv", ""), "capabilities": caps.get("caps_csv", ""),
                      "last_heartbeat_at": last or str(now), "registered_at": caps.get("registered_at_ms", ""),
                      # Our roster calls a worker late after LATE_BEATS intervals; upstream's registration holds
                      # one TTL past the last beat, so the TTL spread over LATE_BEATS is the interval here.
                      "heartbeat_interval_ms": str(-(-ttl_ms // LATE_BEATS))}
            out.append(WorkerInfo(wiid, fields))
        else:
            out.append(WorkerInfo(wiid, {"last_heartbeat_at": last or "0", "namespace": ns}))
    order = {"live": 0, "stale": 1, "gone": 2}
    return now, sorted(out, key=lambda w: (order[w.status(now)], -w.last_heartbeat_at))
