"""Scanners: the retention trimmer (server.md §5 #7).

A finished execution is deleted — payload, result, attempts and their streams, leases, suspension,
waitpoints, signals, dependency records, then its core and policy, then its index entries (that order,
so a trimmer that dies half-way finds the execution again next time) — once its retention has passed
since it finished. Retention is the policy's `stream_policy.retention_ttl_ms`, else the trimmer's
default (24 h). No FCALL: the execution is terminal, so no function writes these keys any more.

Candidates are the oldest entries of each lane's terminal index finished at least `min_retention_ms`
ago, so a per-execution retention shorter than the default does apply (upstream selected with the 24 h
cutoff, making shorter retentions dead letters); entries not yet due are stepped over, at most
`batch * SCAN_FACTOR` per lane and tick.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..backend import Backend
from ..execution import filter_index
from ..keys import ExecKeys, PartitionKeys
from ..reads import text
from .base import Scanner
from .lanes import LaneScanner

#: Upstream's default retention of a finished execution.
DEFAULT_RETENTION_MS = 86_400_000
#: Keys per DEL.
DEL_CHUNK = 500
#: Terminal entries examined per lane and tick, as a multiple of `batch`.
SCAN_FACTOR = 5


def retention_of(policy_text: Any, default_ms: int) -> int:
    try:
        policy = json.loads(text(policy_text) or "{}")
        v = policy.get("stream_policy", {}).get("retention_ttl_ms") if isinstance(policy, dict) else None
    except (ValueError, AttributeError):
        return default_ms
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else default_ms


def delete_execution(backend: Backend, eid: str, lane: str) -> int:
    """Delete one finished execution and its index entries; returns how many keys were deleted."""
    k = ExecKeys(eid)
    pipe = backend.client.pipeline(transaction=False)
    pipe.zrange(k.attempts, 0, -1)
    pipe.smembers(k.waitpoints)
    pipe.zrange(k.signals, 0, -1)
    pipe.smembers(k.deps_all_edges)
    pipe.hget(k.core, "execution_kind")
    pipe.hgetall(k.tags)
    attempts, waitpoints, signals, edges, kind, tags = pipe.execute()
    ix = k.idx
    subs = [k.payload, k.result, k.tags, k.lease_current, k.lease_history, k.claim_grant, k.suspension_current,
            k.suspension_satisfied_set, k.suspension_satisfied_signals, k.suspension_member_map,
            k.deps_meta, k.deps_unresolved, k.journal, k.renewals]
    subs += [k.stream_summary(a) for a in map(text, attempts)]
    for a in map(text, attempts):
        subs += [k.attempt(a), k.attempt_usage(a), k.attempt_policy(a), k.stream(a), k.stream_meta(a),
                 k.attempt_traceback(a)]
    for w in map(text, waitpoints):
        subs += [ix.waitpoint(w), ix.waitpoint_signals(w), ix.waitpoint_condition(w)]
    for s in map(text, signals):
        subs += [ix.signal(s), ix.signal_payload(s)]
    subs += [k.dep_edge(text(e)) for e in edges]
    # The sets naming sub-keys go last among them: a retry must still find what they name.
    subs += [k.attempts, k.waitpoints, k.signals, k.deps_all_edges]
    deleted = 0
    for i in range(0, len(subs), DEL_CHUNK):
        deleted += int(backend.client.delete(*subs[i:i + DEL_CHUNK]))
    deleted += int(backend.client.delete(k.core, k.policy))
    pipe = backend.client.pipeline(transaction=False)
    pipe.zrem(ix.lane(lane).terminal, eid)
    pipe.srem(ix.all_executions, eid)
    pipe.zrem(ix.created, eid)
    filter_index.drop(pipe, eid, text(kind), {text(a): text(b) for a, b in tags.items()})
    pipe.execute()
    return deleted


@dataclass
class RetentionTrimmer(LaneScanner):
    name: str = "retention_trimmer"
    interval_ms: int = 60_000
    batch: int = 20
    default_retention_ms: int = DEFAULT_RETENTION_MS
    min_retention_ms: int = 60_000

    def scan_partition(self, n: int, now_ms: int) -> int:
        ix = PartitionKeys(n)
        done = 0
        for lane in self.known_lanes():
            done += self._trim_lane(ix, lane, now_ms)
        return done

    def _trim_lane(self, ix: PartitionKeys, lane: str, now_ms: int) -> int:
        key, cutoff = ix.lane(lane).terminal, now_ms - min(self.min_retention_ms, self.default_retention_ms)
        done = offset = 0
        while done < self.batch and offset < self.batch * SCAN_FACTOR:
            rows = self.backend.client.zrangebyscore(key, "-inf", cutoff, start=offset, num=self.batch,
                                                     withscores=True)
            if not rows:
                break
            pipe = self.backend.client.pipeline(transaction=False)
            for eid, _ in rows:
                pipe.get(ExecKeys(text(eid)).policy)
            for (eid, finished), policy in zip(rows, pipe.execute(), strict=True):
                if finished + retention_of(policy, self.default_retention_ms) <= now_ms:
                    delete_execution(self.backend, text(eid), lane)
                    done += 1
                else:
                    offset += 1  # not due yet: step over it
                if done >= self.batch:
                    break
            if len(rows) < self.batch:
                break
        return done


def scanners(backend: Backend) -> list[Scanner]:
    """The scanners of this area, configured from backend.settings."""
    return [RetentionTrimmer(backend)]
