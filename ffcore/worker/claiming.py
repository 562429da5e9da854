"""Finding and claiming work for a worker: fresh/resumed claims and reclaims of lost leases.

Fast path (one round trip in the common case): the lane registry (`keys.lane_partitions`, written at
create) names the partitions that hold a lane's solo executions; `ff_claim_next` picks and claims the
heads of those eligible sets directly (same writes as grant + claim). Wake hints (`ffcore.wake`) add
partitions that just got work before the next registry read; an empty-handed claim re-reads a registry
older than `REGISTRY_FRESH_S`. Partitions outside the registry (executions created by other clients)
are found by probing the heads of every (partition, lane) eligible set in a rotating window, at most
every `RING_INTERVAL_S` per fleet (a short-lived turn key decides which worker serving the same lanes
probes; the index reconciler registers such partitions anyway): never starved, never a hot loop, and a
hundred idle workers cost the server no more ring probes than one.

Contract path (ffcore.worker.grant_claim.claim_contract), for what the fast path hands back (budget/quota
attachments need admission first, capability mismatches need the grant's refusal and a route block): (1) one
pipeline pre-reading the candidates, (2) admission, (3) one pipeline of grant + claim pairs (Valkey runs them
in order, so each claim sees its grant). Priority/FIFO order holds within a partition; partitions rotate.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ffcore import events, keys, metrics, routing
from ffcore import functions as F
from ffcore.backend import Backend
from ffcore.budgets import admission
from ffcore.errors import ScriptError
from ffcore.ids import ExecutionId, new_uuid, new_uuid_pairs
from ffcore.keys import ExecKeys, PartitionKeys
from ffcore.policy import parse_stored_policy
from ffcore.reads import decode_map, text
from ffcore.worker import grant_claim
from ffcore.worker.task import ClaimedTask

log = logging.getLogger("ffcore.worker.claiming")

#: How long the lane registry read is reused before it is read again.
REGISTRY_TTL_S = 1.0
#: An empty-handed claim re-reads a registry older than this before probing the ring.
REGISTRY_FRESH_S = 0.5
#: Longest time between two probes of the whole partition ring while the registry keeps a worker busy.
RING_INTERVAL_S = 5.0
#: Longest time between two reclaim probes of the whole partition ring (the registry's: every call).
RECLAIM_RING_S = 5.0
#: How long a lane's eligible set whose heads gave this worker nothing (work indexed for capabilities it
#: lacks) is left out of its claims.
BARREN_TTL_S = 2.0

_PRE_FIELDS = ("total_attempt_count", "current_attempt_index", "attempt_state", "execution_kind", "lane_id",
               "current_worker_instance_id", "ownership_state", *admission.CORE_FIELDS)



@dataclass(frozen=True)
class Identity:
    worker_id: str
    worker_instance_id: str
    lanes: tuple[str, ...]
    capabilities_csv: str
    lease_ttl_ms: int
    #: Handler slots (a hand-off re-lists the worker while it holds fewer leases on the partition).
    slots: int = 1


@dataclass
class Candidate:
    eid: ExecutionId
    pre: dict[str, str]
    policy: dict[str, Any]
    payload: bytes
    tags: dict[str, str]


def _scan_window(n: int) -> int:
    """How many eligible heads one fast-path claim of `n` examines (SCAN_PER_CLAIM, SCAN_EXTRA in
    lua/fastpath.lua)."""
    return min(n, F.MAX_CLAIMS) * 2 + 16


class Claimer:
    """Claims for one worker identity; `on_task_done` is attached to every task it builds."""

    def __init__(self, backend: Backend, ident: Identity, on_task_done: Callable[[ClaimedTask], None] | None = None,
                 window: int = 64) -> None:
        self.backend = backend
        self.ident = ident
        self.on_task_done = on_task_done
        p = backend.settings.partitions.flow
        self.window = min(window, p)
        # Instances start at different offsets so they do not all probe the same partitions first.
        self.cursor = int.from_bytes(ident.worker_instance_id.encode()[-4:].rjust(4, b"\0"), "big") % p
        self._registry: list[tuple[int, str]] = []
        self._registry_at = float("-inf")
        self._registry_cursor = self.cursor
        self._ring_at = float("-inf")
        # The registry's partitions are probed from the start; the whole ring only after RECLAIM_RING_S,
        # so a fleet starting together does not open with a storm of ring probes.
        self._reclaim_ring_at = time.monotonic()
        self._have = frozenset(filter(None, ident.capabilities_csv.split(",")))
        #: Per lane, the capability lists (sorted csv) with an index this worker can run.
        self._capsets: dict[str, list[str]] = {}
        #: Per (partition, lane): when a claim last found nothing for us among its eligible heads.
        self._barren: dict[tuple[int, str], float] = {}
        #: Set while this worker listens on its own wake channel (keys.worker_wake): its claims then put it on
        #: (or take it off) each lane's idle set, so a create wakes it alone (lua/fastpath.lua wake_one).
        self.listening = False
        #: (partition, lane, capability csv or "") of every claim that passed `idle` (see idle_slots).
        self._listed: set[tuple[int, str, str]] = set()
        #: Set when this worker may be on no idle set although it has a free slot (it just began listening, or a
        #: slot freed without a successor claim): the next claim then also claims the sources whose heads are
        #: empty, and each such claim, coming back short, lists it there.
        self.relist = False

    # ------------------------------------------------------------ discovery
    def _probe_lanes(self, index: Callable[[PartitionKeys, str], str], hi: str | int, per_key: int,
                     partitions: Sequence[int] | None = None) -> list[tuple[str, str]]:
        """`_probe` with the lane each eid was found under; only `partitions` (one pipeline) when given."""
        p = self.backend.settings.partitions.flow
        found: list[tuple[str, str]] = []
        rounds = 1 if partitions is not None else max(1, p // self.window)
        for _ in range(rounds):
            if partitions is not None:
                parts = list(partitions)
            else:
                parts = [(self.cursor + i) % p for i in range(self.window)]
                self.cursor = (self.cursor + self.window) % p
            pipe = self.backend.client.pipeline(transaction=False)
            order = [(n, lane) for n in parts for lane in self.ident.lanes]
            for n, lane in order:
                pipe.zrangebyscore(index(PartitionKeys(n), lane), "-inf", hi, start=0, num=per_key)
            for (_, lane), batch in zip(order, pipe.execute(), strict=True):
                found += [(text(x), lane) for x in batch]
            if len(found) >= per_key:
                break
        return found

    def preread(self, eids: Sequence[str]) -> list[Candidate]:
        pipe = self.backend.client.pipeline(transaction=False)
        for e in eids:
            k = ExecKeys(e)
            pipe.hmget(k.core, _PRE_FIELDS)
            pipe.get(k.policy)
            pipe.get(k.payload)
            pipe.hgetall(k.tags)
        raw = pipe.execute()
        out = []
        for i, e in enumerate(eids):
            vals, pol, payload, tags = raw[4 * i: 4 * i + 4]
            pre = dict(zip(_PRE_FIELDS, map(text, vals), strict=True))
            out.append(Candidate(ExecutionId(e), pre, parse_stored_policy(text(pol)),
                                  bytes(payload or b""), decode_map(tags)))
        return out

    # ------------------------------------------------------------ fresh / resumed claims
    def claim(self, max_tasks: int) -> list[ClaimedTask]:
        if max_tasks <= 0:
            return []
        tasks: list[ClaimedTask] = []
        slow: list[str] = []
        now = time.monotonic()
        ring_due = now - self._ring_at >= RING_INTERVAL_S
        if ring_due and max_tasks > 1:
            # A busy registry must not starve ring-only partitions: they get a share first.
            ring_due = False
            if self._ring_turn("claim", now):
                self._claim_ring(max(1, max_tasks // 4), tasks, slow)
        self._claim_registry(max_tasks - len(tasks), tasks, slow)
        if not tasks and not slow and now - self._registry_at >= REGISTRY_FRESH_S:
            # Empty-handed on a registry that may predate the work (a new partition): re-read it once
            # before the far costlier probe of the whole ring.
            self._claim_registry(max_tasks, tasks, slow, max_age_s=REGISTRY_FRESH_S)
        # The ring probe costs a round trip per 64 partitions: time-boxed (with a hundred workers, a probe
        # each per empty-handed poll would dominate the server).
        if len(tasks) + len(slow) < max_tasks and ring_due and self._ring_turn("claim", now):
            self._claim_ring(max_tasks - len(tasks), tasks, slow)
        if slow and len(tasks) < max_tasks:
            tasks += grant_claim.claim_contract(self, list(dict.fromkeys(slow))[:max_tasks - len(tasks)])
        if tasks:
            events.publish(self.backend, ids=[t.execution_id for t in tasks])  # live pages: waiting -> active
            took = time.monotonic() - now
            for t in tasks:
                metrics.observe(metrics.CLAIM_SECONDS, took, t.lane)
        return tasks

    def _ring_turn(self, probe: str, now: float) -> bool:
        """Whether this worker probes the whole ring for `probe` now: at most once per interval here, and
        only when no other worker serving the same lanes took this interval's turn."""
        interval = RING_INTERVAL_S if probe == "claim" else RECLAIM_RING_S
        if probe == "claim":
            self._ring_at = now
        else:
            self._reclaim_ring_at = now
        return bool(self.backend.client.set(keys.ring_turn(probe, self.ident.lanes), self.ident.worker_instance_id,
                                            nx=True, px=max(1, int(interval * 1000))))

    def idle_slots(self, partition: int, lane: str, caps_csv: str = "") -> int:
        """What a claim from a source — the lane's eligible set on `partition`, or with `caps_csv` that
        capability list's index — passes as `idle`: the handler slots while the worker listens (its claims then
        keep its entry on the source's idle set and it takes hand-offs), else 0. The source is remembered for
        `unlist`. In replicated mode (FF_DURABILITY) always 0: a hand-off is claimed by the create's write, which
        this worker cannot see confirmed, so creates wake it instead and its own claim (with its WAIT) comes first."""
        if not self.listening or self.backend.settings.replicated:
            return 0
        self._listed.add((partition, lane, caps_csv))
        return self.ident.slots

    def unlist(self) -> None:
        """Stop being woken alone: no more idle listings, and off every idle set a claim of ours may have
        listed us on (a create would otherwise wake a stopping worker that no longer claims)."""
        self.listening = False
        # copy(): one step under the GIL, while a commit still in flight may add to it.
        sources = self._listed.copy() | {(n, lane, "") for n, lane in self._registry}
        if not sources:
            return
        idn = self.ident
        member = F.idle_member(idn.worker_id, idn.worker_instance_id, idn.lease_ttl_ms, idn.slots)
        pipe = self.backend.client.pipeline(transaction=False)
        for n, lane, cs in sorted(sources):
            lk = PartitionKeys(n).lane(lane)
            pipe.zrem(lk.idle_capable(cs) if cs else lk.idle, member, idn.worker_instance_id)
        pipe.execute()

    def can_run(self, caps_csv: str) -> bool:
        """Whether this worker holds every capability of the list `caps_csv`."""
        return routing.runs(caps_csv, self._have)

    def hint(self, lane: str, partitions: Sequence[int]) -> None:
        """A wake message named the partitions that just got work on `lane`: probe them from now on."""
        if lane not in self.ident.lanes:
            return
        new = {(n, lane) for n in partitions} - set(self._registry)
        if new:
            self._registry = sorted({*self._registry, *new})  # one assignment: the claim loop reads it unlocked

    def _registry_pairs(self, max_age_s: float = REGISTRY_TTL_S) -> list[tuple[int, str]]:
        """(partition, lane) pairs the lane registry names, read at most every `max_age_s`, rotated."""
        now = time.monotonic()
        if now - self._registry_at >= max_age_s:
            commands: list[tuple[str, str]] = []
            for lane in self.ident.lanes:
                commands.append(("SMEMBERS", keys.lane_partitions(lane)))
                if self._have:
                    commands.append(("SMEMBERS", keys.lane_capsets(lane)))
            raw = self.backend.read_many(commands)
            step = 2 if self._have else 1
            self._registry = sorted({(int(text(n)), lane) for i, lane in enumerate(self.ident.lanes)
                                     for n in raw[i * step]})
            if self._have:
                self._capsets = {lane: routing.covered(map(text, raw[i * step + 1]), self._have)
                                 for i, lane in enumerate(self.ident.lanes)}
            self._registry_at = now
        pairs = self._registry
        if len(pairs) > 1:
            self._registry_cursor = (self._registry_cursor + 1) % len(pairs)
            pairs = pairs[self._registry_cursor:] + pairs[:self._registry_cursor]
        return pairs

    def _claim_registry(self, want: int, tasks: list[ClaimedTask], slow: list[str],
                        max_age_s: float = REGISTRY_TTL_S) -> None:
        pairs = self._registry_pairs(max_age_s)
        if want <= 0 or not pairs:
            return
        # Capability indexes this worker can run first (nobody else takes those), then the lane's set.
        sources = [(n, lane, cs) for n, lane in pairs for cs in self._capsets.get(lane, ())]
        sources += [(n, lane, "") for n, lane in pairs]
        relist, self.relist = self.relist and self.listening, False
        if len(sources) == 1 and not self._have:  # claimed whatever its heads: a short claim lists us anyway
            self._claim_fast({sources[0]: want}, tasks, slow)
            return
        # Several sources: look at their heads first so no claim is made that we cannot return. A lane's
        # eligible set is read as far as the claim would examine it: when those heads already gave us
        # nothing (all indexed for capabilities we lack), they are not examined again for a while —
        # otherwise every capable worker re-reads every other capability's work on each poll and wake.
        commands = []
        for n, lane, cs in sources:
            lk = PartitionKeys(n).lane(lane)
            commands.append(("ZRANGE", lk.capable(cs) if cs else lk.eligible, 0,
                             (want if cs else _scan_window(want)) - 1))
        plan: dict[tuple[int, str, str], int] = {}
        left, now = want, time.monotonic()
        for src, heads in zip(sources, self.backend.read_many(commands), strict=True):
            n, lane, cs = src
            barren = not cs and now - self._barren.get((n, lane), float("-inf")) < BARREN_TTL_S
            if not heads or barren:
                # Nothing there for us: a claim of one comes back short and lists us on that source's idle set (at
                # most one task more than asked, should one arrive meanwhile: it is returned and runs).
                if relist:
                    plan[src] = 1
                continue
            if left <= 0:
                continue
            plan[src] = min(len(heads), left)
            left -= plan[src]
        for (n, lane, cs), found in self._claim_fast(plan, tasks, slow).items():
            if cs:
                continue
            if found:
                self._barren.pop((n, lane), None)
            else:
                self._barren[(n, lane)] = now
                self._registry_at = float("-inf")  # work we cannot run: maybe under capsets we have not read

    def _claim_ring(self, want: int, tasks: list[ClaimedTask], slow: list[str]) -> None:
        if want <= 0:
            return
        plan: dict[tuple[int, str, str], int] = {}
        left = want
        found = self._probe_lanes(lambda ix, lane: ix.lane(lane).eligible, "+inf", min(want, 8))
        for e, lane in found:
            if left > 0:
                src = (ExecutionId(e).partition_index, lane, "")
                plan[src] = plan.get(src, 0) + 1
                left -= 1
        if found:
            # Work the registry did not name (another client created it): registered for the whole fleet,
            # which probes the ring only once per interval and may need other capabilities than ours.
            pairs = {(ExecutionId(e).partition_index, lane) for e, lane in found}
            pipe = self.backend.client.pipeline(transaction=False)
            for n, lane in pairs:
                pipe.sadd(keys.lane_partitions(lane), n)
            pipe.execute()
            for n, lane in pairs:
                self.hint(lane, [n])
        self._claim_fast(plan, tasks, slow)

    def _claim_fast(self, plan: dict[tuple[int, str, str], int], tasks: list[ClaimedTask],
                    slow: list[str]) -> dict[tuple[int, str, str], int]:
        """One pipeline of fast-path claims, one call per source — (partition, lane) and a capability list
        ("" = the lane's eligible set) — with its share of the batch. Returns, per source that answered,
        how many executions it claimed or handed back for the contract path."""
        found: dict[tuple[int, str, str], int] = {}
        if not plan:
            return found
        idn = self.ident
        calls = []
        for (n, lane, cs), count in plan.items():
            kw: dict[str, Any] = {
                "lane": lane, "worker_id": idn.worker_id, "worker_instance_id": idn.worker_instance_id,
                "capabilities_csv": idn.capabilities_csv, "lease_ttl_ms": idn.lease_ttl_ms,
                "ids": new_uuid_pairs(min(count, F.MAX_CLAIMS)), "idle": self.idle_slots(n, lane, cs)}
            calls.append(F.claim_capable(n, caps_csv=cs, **kw) if cs else F.claim_next(n, **kw))
        for src, reply in zip(plan, self.backend.call_many(calls), strict=True):
            lane = src[1]
            if isinstance(reply, ScriptError):
                log.warning("fast claim on lane %s failed: %s", lane, reply)
                continue
            got: F.Claims = reply.raw[0]
            tasks += [self.task_from(c, lane) for c in got.claimed]
            slow += got.slow
            found[src] = len(got.claimed) + len(got.slow)
        return found

    def task_from(self, c: F.Claimed, lane: str) -> ClaimedTask:
        """A ClaimedTask from a fast-path claim (no admission attachments by construction)."""
        return ClaimedTask(
            backend=self.backend, execution_id=ExecutionId(c.execution_id), lane=lane, kind=c.kind,
            payload=c.payload, tags=c.tags,
            policy=parse_stored_policy(c.policy_json) if c.policy_json not in ("", "{}") else {},
            attempt_index=c.attempt_index,
            attempt_id=c.attempt_id, attempt_type=c.attempt_type, lease_id=c.lease_id, lease_epoch=c.lease_epoch,
            lease_expires_at=c.lease_expires_at, lease_ttl_ms=self.ident.lease_ttl_ms,
            worker_instance_id=self.ident.worker_instance_id, on_done=self.on_task_done,
        )

    def task_of(self, c: Candidate, lane: str, reply: F.Reply) -> ClaimedTask:
        lease_id, epoch, expires, attempt_id, attempt_index, attempt_type = reply.fields[:6]
        task = ClaimedTask(
            backend=self.backend, execution_id=c.eid, lane=lane, kind=c.pre["execution_kind"], payload=c.payload,
            tags=c.tags, policy=c.policy, attempt_index=int(attempt_index), attempt_id=attempt_id,
            attempt_type=attempt_type, lease_id=lease_id, lease_epoch=int(epoch), lease_expires_at=int(expires),
            lease_ttl_ms=self.ident.lease_ttl_ms, worker_instance_id=self.ident.worker_instance_id,
            on_done=self.on_task_done,
        )
        task.quota_policy_id = admission.attachments(c.pre, c.policy).quota_id  # released when the attempt ends
        return task

    # ------------------------------------------------------------ reclaim of lost leases
    def reclaim_granted(self, eid: str, lane: str, *, default_max_reclaim_count: int | None = None) -> ClaimedTask:
        """Consume this identity's reclaim grant on `eid` (`ff_reclaim_execution`): a new attempt under a new
        lease. Raises ScriptError with the engine's code (the caller maps it to an outcome)."""
        (c,) = self.preread([eid])
        refs = F.CoreRefs.from_core(c.pre)
        idn = self.ident
        reply = self.backend.call(F.reclaim_execution(
            ExecKeys(c.eid), refs, lane=lane, worker_id=idn.worker_id, worker_instance_id=idn.worker_instance_id,
            lease_id=new_uuid(), attempt_id=new_uuid(), lease_ttl_ms=idn.lease_ttl_ms,
            next_attempt_index=refs.total_attempts, default_max_reclaim_count=default_max_reclaim_count))
        return self.task_of(c, lane, reply)

    def reclaim(self, max_tasks: int) -> list[ClaimedTask]:
        """Take over executions whose lease expired or was revoked (new attempt, epoch + 1)."""
        if max_tasks <= 0:
            return []
        # The registry's partitions every time; the whole ring (foreign executions) every RECLAIM_RING_S:
        # with many workers, a ring probe each (2 x 256 reads a second) would dominate the server.
        mono = time.monotonic()
        parts: list[int] | None = None
        if mono - self._reclaim_ring_at < RECLAIM_RING_S or not self._ring_turn("reclaim", mono):
            parts = sorted({n for n, _ in self._registry_pairs()})
            if not parts:
                return []
        now = self.backend.now_ms()
        expired = [e for e, _ in self._probe_lanes(lambda ix, lane: ix.lease_expiry, now, max_tasks, parts)]
        revoked = [e for e, _ in self._probe_lanes(lambda ix, lane: ix.lane(lane).active, now, max_tasks, parts)]
        eids = list(dict.fromkeys(expired + revoked))
        if not eids:
            return []
        # Mark due leases expired first (idempotent), so a missing scanner does not stall recovery.
        self.backend.call_many([F.mark_lease_expired_if_due(ExecKeys(e)) for e in eids])
        cands = [c for c in self.preread(eids)
                 if c.pre["ownership_state"] in ("lease_expired_reclaimable", "lease_revoked")
                 and (c.pre["lane_id"] or "default") in self.ident.lanes][:max_tasks]
        calls: list[F.Call] = []
        idn = self.ident
        for c in cands:
            k, lane = ExecKeys(c.eid), c.pre["lane_id"] or "default"
            refs = F.CoreRefs.from_core(c.pre)
            calls.append(F.issue_reclaim_grant(k, lane=lane, worker_id=idn.worker_id,
                                               worker_instance_id=idn.worker_instance_id,
                                               grant_ttl_ms=self.backend.settings.grant_ttl_ms,
                                               capabilities_csv=idn.capabilities_csv))
            calls.append(F.reclaim_execution(k, refs, lane=lane, worker_id=idn.worker_id,
                                             worker_instance_id=idn.worker_instance_id, lease_id=new_uuid(),
                                             attempt_id=new_uuid(), lease_ttl_ms=idn.lease_ttl_ms,
                                             next_attempt_index=refs.total_attempts))
        replies = self.backend.call_many(calls)
        tasks = []
        for i, c in enumerate(cands):
            claim = replies[2 * i + 1]
            if isinstance(claim, ScriptError):
                if claim.code not in grant_claim.SKIP:
                    log.warning("reclaim of %s failed: %s", c.eid, claim)
                continue
            tasks.append(self.task_of(c, c.pre["lane_id"] or "default", claim))
        events.publish(self.backend, ids=[t.execution_id for t in tasks])
        return tasks
