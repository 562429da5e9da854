"""Operator-side client: create, read, list, cancel, replay, change priority, revoke.

Reads are pipelined and never scan the keyspace; every write is one FCALL from `functions`.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ffcore import events, failover, keys, lane_spread, routing, wake
from ffcore import functions as F
from ffcore.backend import Backend
from ffcore.budgets import admission
from ffcore.errors import InvalidInput
from ffcore.execution import filter_index
from ffcore.execution.combine import Combiner
from ffcore.execution.tags import check_tags, set_execution_tags
from ffcore.ids import ExecutionId, new_uuid_pairs
from ffcore.keys import ExecKeys, FlowKeys, PartitionKeys
from ffcore.policy import Policy
from ffcore.reads import core_refs, decode_map, read_core, text
from ffcore.state import PublicState, StateVector
from ffcore.upstream.reads import indexes

if TYPE_CHECKING:
    from ffcore.schedules import Schedules
    from ffcore.suspension.signals import SignalOutcome


@dataclass(frozen=True)
class CreateResult:
    execution_id: ExecutionId
    public_state: str
    duplicate: bool


@dataclass(frozen=True)
class Attempt:
    index: int
    fields: dict[str, str]


@dataclass(frozen=True)
class Execution:
    execution_id: ExecutionId
    core: dict[str, str]
    state: StateVector
    tags: dict[str, str]
    policy: str
    attempts: list[Attempt] = field(default_factory=list)

    def __getitem__(self, name: str) -> str:
        # KeyError for non-fields keeps Django templates falling back to attributes (ex.attempts).
        return self.core[name]


@dataclass(frozen=True)
class Row:
    execution_id: str
    score: float
    fields: dict[str, str]


@dataclass(frozen=True)
class Page:
    rows: list[Row]
    next_cursor: str | None


#: Summary fields read per listed execution.
LIST_FIELDS = ("namespace", "lane_id", "execution_kind", "public_state", "priority", "created_at",
               "total_attempt_count", "current_worker_id", "current_worker_instance_id", "flow_id")

#: Lane indexes by public state, for listing.
INDEX_BY_STATE = {
    "waiting": "eligible", "delayed": "delayed", "active": "active", "suspended": "suspended",
    "waiting_children": "blocked:dependencies", "rate_limited": "blocked:budget",
}
TERMINAL_INDEX = "terminal"


#: Policy().to_text(), precomputed: most creates carry no policy.
_NO_POLICY = Policy().to_text()

#: How long a Client trusts its own registration of a (lane, partition) in the lane registry (and of a
#: lane in the lanes index) before a plain create sends the SADDs again. Nothing prunes the registry, so
#: resending it on every create cost two commands per task for nothing (issue #21); the refresh heals a
#: flushed server, and workers also learn a partition from the create's wake hint and the ring probe.
REGISTERED_TTL_S = 5.0


def _plain_policy(call: F.Call) -> bool:
    """No budget or quota attachment in the create's policy (those need the general path)."""
    return str(call.args[6]) == _NO_POLICY or not admission.core_fields(str(call.args[6]))


def _validate_tags(tags: dict[str, str] | None) -> dict[str, str]:
    if tags is not None and not isinstance(tags, dict):
        raise InvalidInput("invalid_input", ["tags must map strings to strings"])
    return dict(check_tags(tags or {}, at_create=True))  # the one rule of every door (ffcore.execution.tags)


class Client:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        #: (lane, partition) -> monotonic time this client last sent its registry SADDs (REGISTERED_TTL_S).
        self._registered: dict[tuple[str, int], float] = {}
        #: Plain creates of concurrent threads share round trips (ffcore.execution.combine).
        self._creates: Combiner[F.Call, CreateResult] = Combiner(self._create_plain_each)
        self._spread = lane_spread.for_backend(backend)

    @property
    def partitions(self) -> int:
        return self.backend.settings.partitions.flow

    def mint(self, lane: str, idempotency_key: str | None = None) -> ExecutionId:
        """A new solo execution id on its lane's partition (one of them if the lane is spread: ffcore.lane_spread)."""
        return ExecutionId.mint(self._spread.partition(lane, idempotency_key))

    @property
    def schedules(self) -> Schedules:
        """Recurring schedules (ffcore.schedules): create, update, pause, resume, trigger, delete, list, get."""
        from ffcore.schedules import Schedules  # lazy: ffcore.schedules imports this module

        return Schedules(self)

    # ------------------------------------------------------------ create
    def create_call(
        self, *, kind: str, lane: str = "default", namespace: str = "default", payload: bytes | str = b"",
        priority: int = 0, delay_until: int | None = None, deadline_at: int | None = None,
        idempotency_key: str | None = None, tags: dict[str, str] | None = None, policy: Policy | None = None,
        creator: str = "client", execution_id: str | None = None,
    ) -> F.Call:
        if not kind:
            raise InvalidInput("invalid_input", ["kind must not be empty"])
        if not isinstance(kind, str) or not kind.isprintable():  # a newline or tab in a kind breaks every listing
            raise InvalidInput("invalid_input", [f"kind {kind!r} must be printable text (no newlines or tabs)"])
        if not lane or any(c in lane for c in "{}: \t\r\n"):
            raise InvalidInput("invalid_input", [f"lane {lane!r} must be non-empty without braces, colons or spaces"])
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise InvalidInput("invalid_input", ["priority must be an integer"])
        eid = ExecutionId(execution_id) if execution_id else self.mint(lane, idempotency_key)
        data = payload.encode() if isinstance(payload, str) else payload
        return F.create_execution(
            ExecKeys(eid), namespace=namespace, lane=lane, kind=kind, priority=priority, creator=creator,
            policy_json=policy.to_text() if policy is not None else _NO_POLICY, payload=data, delay_until=delay_until,
            idempotency_key=idempotency_key or None, tags=_validate_tags(tags),
            # The policy's execution_deadline_ms and dedup_window_ms (#24 item 6).
            **(policy.create_args(deadline_at) if policy is not None else {"deadline_at": deadline_at}),
        )

    def create(self, **kw: Any) -> CreateResult:
        """One execution. A plain create (see create_many) made while another thread's is in flight rides in
        the next round trip with the others queued meanwhile (ffcore.execution.combine); alone, it goes at
        once in a round trip of its own."""
        if not (kw.get("delay_until") or kw.get("idempotency_key") or kw.get("execution_id")):
            call = self.create_call(**kw)
            if _plain_policy(call):
                return self._creates.submit(call)
        return self.create_many([kw])[0]

    def create_many(self, specs: list[dict[str, Any]]) -> list[CreateResult]:
        """Create several executions in one pipeline (plus the listing index, lane registry and wake hint).

        Plain creates (no delay, idempotency key, given id or budget/quota attachment) take ONE round trip: our
        index, registry and wake commands ride in the pipeline behind the FCALLs, scored with this host's
        clock (a phantom index entry of a refused create is removed afterwards). The others need facts
        first (the server clock for a delay) or the reply (a duplicate, the attachment's core fields) and
        take the general path.
        """
        if not specs:
            return []
        if all(not (s.get("delay_until") or s.get("idempotency_key") or s.get("execution_id")) for s in specs):
            calls = [self.create_call(**spec) for spec in specs]
            if all(_plain_policy(c) for c in calls):
                return self._create_plain(calls)
        return self._create_general(specs)

    def _create_plain(self, calls: list[F.Call]) -> list[CreateResult]:
        """Plain creates in one round trip; the first refused one's error is raised."""
        outs = self._create_plain_each(calls)
        for o in outs:
            if isinstance(o, Exception):
                raise o
        return outs  # type: ignore[return-value]  # no exception among them

    def _create_plain_each(self, calls: list[F.Call]) -> list[CreateResult | Exception]:
        """Plain creates in one round trip: each one's result, or its error (its capability index entry
        dropped again)."""
        now = int(time.time() * 1000)
        mono = time.monotonic()
        registry: dict[str, set[int]] = {}
        capable = routing.IndexBatch()
        needs: list[bool] = []  # per create: does it need capabilities?
        for c in calls:
            eid = _eid_of(c)
            pair = (str(c.args[2]), eid.partition_index)
            if mono - self._registered.get(pair, float("-inf")) >= REGISTERED_TTL_S:
                registry.setdefault(pair[0], set()).add(pair[1])
            csv = routing.required_csv(str(c.args[6]))
            needs.append(bool(csv))
            capable.add(eid.partition_index, str(c.args[2]), csv, str(eid), routing.eligible_score(int(c.args[4]), now))

        def behind(pipe: Any) -> None:
            self._index(pipe, registry, {})

        out: list[CreateResult | Exception] = []
        failed: list[str] = []
        # Capability index entries go in AHEAD of the creates: a worker lacking the capability meets an
        # execution in L:eligible already indexed for the capable ones (else it would route-block it),
        # and an entry whose execution does not exist yet is kept by the claim (ff_claim_capable). The
        # listing index and the wake hint ride inside each create (ff_create_fast's KEYS[9] / ARGV[14]).
        # One wake per lane and batch: the lane's last create announces them all (a plain create's lane
        # lives on one partition, and the pipeline runs the earlier creates first). Work needing capabilities
        # is also offered, create by create, to a worker idle on its capability list's idle set: the lane's
        # idle workers may lack them.
        last = {str(c.args[2]): i for i, c in enumerate(calls)}
        # A waking (offering) create carries a lease and an attempt id: an idle worker may be handed the task.
        fast = [F.as_fast_create(c, created_index=PartitionKeys(_eid_of(c).partition_index).created,
                                 wake=(woke := last[str(c.args[2])] == i), offer=needs[i],
                                 handoff=new_uuid_pairs(1)[0] if woke or needs[i] else None,
                                 more_indexes=filter_index.index_keys(_eid_of(c), str(c.args[3]),
                                                                      filter_index.create_tags(c)))
                for i, c in enumerate(calls)]
        # The ids were minted here, so a send whose connection broke is sent again (by redis-py's retry or
        # ours): a create that had run answers DUPLICATE with our own id — it is ours, created (issue #41).
        replies = failover.resend_idempotent(lambda: self.backend.call_many(fast, ahead=capable.queue, behind=behind))
        for c, reply in zip(calls, replies, strict=True):
            if isinstance(reply, Exception):
                failed.append(str(c.args[0]))
                out.append(reply)
                continue
            eid = _eid_of(c)
            if reply.status == "DUPLICATE":
                out.append(CreateResult(eid, self._state_text(eid), False))
                continue
            out.append(CreateResult(eid if reply[0] == eid else ExecutionId(reply[0]), reply[1], False))
        if failed:
            pipe = self.backend.client.pipeline(transaction=False)
            capable.drop(pipe, set(failed))
            pipe.execute()
        for lane, parts in registry.items():  # sent (the round trip succeeded): trusted for a while
            for n in parts:
                self._registered[(lane, n)] = mono
        events.created(self.backend, [(str(r.execution_id), str(c.args[2]), str(c.args[3]))
                                      for c, r in zip(calls, out, strict=True) if isinstance(r, CreateResult)])
        return out

    def _index(self, pipe: Any, registry: dict[str, set[int]], created: dict[int, dict[str, int]]) -> None:
        """Our listing index and lane registry (outside the contract's create): one command per partition
        or lane rather than per execution."""
        if registry:
            pipe.sadd(keys.LANES_INDEX, *registry)
        for n, members in created.items():
            pipe.zadd(PartitionKeys(n).created, members)
        for lane, parts in registry.items():
            pipe.sadd(keys.lane_partitions(lane), *parts)

    def _create_general(self, specs: list[dict[str, Any]]) -> list[CreateResult]:
        now = self.backend.now_ms()
        # A delay_until that is already due must not name L:delayed as KEYS 5: the Lua would then store an
        # eligible_now execution in the delayed set, where no claim ever finds it (contract §5.2 quirk).
        specs = [{**s, "delay_until": None} if s.get("delay_until") is not None and s["delay_until"] <= now
                 else s for s in specs]
        calls = [self.create_call(**spec) for spec in specs]
        out: list[CreateResult] = []
        pipe = self.backend.client.pipeline(transaction=False)
        created: dict[int, dict[str, int]] = {}
        registry: dict[str, set[int]] = {}
        capable = routing.IndexBatch()
        # Ids minted here are sent again when the connection broke (by redis-py's retry or ours): a create that
        # had run answers DUPLICATE with our own random id, so it is ours and counts as created (issue #41).
        replies = failover.resend_idempotent(lambda: self.backend.call_many([F.as_fast_create(c) for c in calls]))
        for spec, call, reply in zip(specs, calls, replies, strict=True):
            if isinstance(reply, Exception):
                raise reply
            minted = not (spec.get("execution_id") or spec.get("idempotency_key"))
            if reply.status == "DUPLICATE" and not minted:
                out.append(CreateResult(ExecutionId(reply[0]), "", True))
                continue
            eid = ExecutionId(reply[0])
            state = self._state_text(eid) if reply.status == "DUPLICATE" else reply[1]
            out.append(CreateResult(eid, state, False))
            if state == "waiting" and call.args[8] != "":
                self._repair_lapsed_delay(ExecKeys(eid), str(call.args[2]), int(call.args[4]))
            created.setdefault(eid.partition_index, {})[str(eid)] = now
            filter_index.add(pipe, eid, now, str(call.args[3]), filter_index.create_tags(call))
            registry.setdefault(str(call.args[2]), set()).add(eid.partition_index)
            policy_text = str(call.args[6])
            if policy_text != "{}" and (attach := admission.core_fields(policy_text)):
                pipe.hset(ExecKeys(eid).core, mapping=attach)  # the fields upstream's scheduler reads
            if state == "waiting":
                capable.add(eid.partition_index, str(call.args[2]), routing.required_csv(policy_text), str(eid),
                            routing.eligible_score(int(call.args[4]), now))
        self._index(pipe, registry, created)
        capable.queue(pipe)
        # Idle workers of the lane claim at once instead of at their next poll.
        woken: dict[str, set[int]] = {}
        for c, r in zip(calls, out, strict=True):
            if r.public_state == "waiting":
                woken.setdefault(str(c.args[2]), set()).add(r.execution_id.partition_index)
        wake.announce(self.backend, woken, pipe)
        pipe.execute()
        events.created(self.backend, [(r.execution_id, str(c.args[2]), str(c.args[3]))
                                      for c, r in zip(calls, out, strict=True) if not r.duplicate])
        return out

    def _repair_lapsed_delay(self, k: ExecKeys, lane: str, priority: int) -> None:
        """The delay lapsed between our clock read and the create: move it from L:delayed to L:eligible."""
        self.backend.call(F.change_priority(k, lane=lane, priority=priority))
        self.backend.call(F.promote_delayed(k, k.lane(lane), now_ms=self.backend.now_ms()))

    # ------------------------------------------------------------ reads
    def get_execution(self, eid: str, *, with_attempts: bool = True) -> Execution | None:
        k = ExecKeys(eid)
        pipe = self.backend.client.pipeline(transaction=False)
        pipe.hgetall(k.core)
        pipe.hgetall(k.tags)
        pipe.get(k.policy)
        pipe.zrange(k.attempts, 0, -1)
        core_raw, tags_raw, policy_raw, attempt_ids = pipe.execute()
        if not core_raw:
            return None
        core = decode_map(core_raw)
        attempts: list[Attempt] = []
        if with_attempts and attempt_ids:
            idxs = sorted(int(text(a)) for a in attempt_ids)
            pipe = self.backend.client.pipeline(transaction=False)
            for i in idxs:
                pipe.hgetall(k.attempt(i))
            attempts = [Attempt(i, decode_map(h)) for i, h in zip(idxs, pipe.execute(), strict=True)]
        return Execution(k.eid, core, StateVector.from_core(core), decode_map(tags_raw), text(policy_raw), attempts)

    def _state_text(self, eid: str) -> str:
        state = self.get_state(eid)
        return state.value if state is not None else ""

    def get_state(self, eid: str) -> PublicState | None:
        raw = self.backend.client.hget(ExecKeys(eid).core, "public_state")
        return PublicState(text(raw)) if raw else None

    def get_result(self, eid: str) -> bytes | None:
        raw = self.backend.client.get(ExecKeys(eid).result)
        return None if raw is None else bytes(raw)

    def get_payload(self, eid: str) -> bytes:
        raw = self.backend.client.get(ExecKeys(eid).payload)
        return b"" if raw is None else bytes(raw)

    def list_executions(self, partition: int, lane: str, state: str, *, cursor: str | None = None,
                        limit: int = 50) -> Page:
        """One lane index of one partition in score order, cursor-paged (cursor = `<score>|<eid>`)."""
        suffix = INDEX_BY_STATE.get(state, TERMINAL_INDEX if state in {p.value for p in PublicState} else state)
        if not 1 <= limit <= 1000:
            raise InvalidInput("invalid_input", ["limit must be 1..1000"])
        key = PartitionKeys(partition).lane(lane).index(suffix)
        lo: str = "-inf"
        after: tuple[float, str] | None = None
        if cursor:
            try:
                s, e = cursor.split("|", 1)
                after = (float(s), e)
            except ValueError:
                raise InvalidInput("invalid_input", [f"cursor {cursor!r} is malformed"]) from None
            lo = repr(after[0])
        rows: list[tuple[str, float]] = []
        offset = 0
        while len(rows) < limit + 1:
            batch = self.backend.client.zrangebyscore(key, lo, "+inf", start=offset, num=limit + 1, withscores=True)
            if not batch:
                break
            offset += len(batch)
            for member, score in batch:
                m = text(member)
                if after is not None and (score, m) <= after:
                    continue
                rows.append((m, float(score)))
        page, more = rows[:limit], len(rows) > limit
        pipe = self.backend.client.pipeline(transaction=False)
        for m, _ in page:
            pipe.hmget(ExecKeys(m).core, LIST_FIELDS)
        out = [Row(m, s, dict(zip(LIST_FIELDS, map(text, vals), strict=True)))
               for (m, s), vals in zip(page, pipe.execute() if page else [], strict=True)]
        nxt = f"{page[-1][1]!r}|{page[-1][0]}" if more and page else None
        return Page(out, nxt)

    def list_range(self, partition: int, lane: str, index: str, *, offset: int = 0,
                   limit: int = 50) -> list[dict[str, str]]:
        """Upstream's offset listing of one lane index (score order) with a row of summary fields each."""
        key = PartitionKeys(partition).lane(lane).index(index)
        eids = [text(m) for m in self.backend.client.zrangebyscore(key, "-inf", "+inf", start=offset, num=limit)]
        pipe = self.backend.client.pipeline(transaction=False)
        fields = ("namespace", "lane_id", "execution_kind", "public_state", "priority", "created_at")
        for e in eids:
            pipe.hmget(ExecKeys(e).core, fields)
        return [{"execution_id": e, **dict(zip(fields, map(text, vals), strict=True))}
                for e, vals in zip(eids, pipe.execute() if eids else [], strict=True)]

    # ------------------------------------------------------------ operator writes
    # Each makes its FCALL(s) and announces the change to live pages: every door (dashboard, REST, bulk)
    # calls these and adds only access checks, validation and the audit entry.
    def cancel(self, eid: str, *, reason: str, source: str = "operator_override", lease_id: str = "",
               lease_epoch: str = "") -> F.Reply:
        k = ExecKeys(eid)
        reply = self.backend.call(F.cancel_execution(k, core_refs(self.backend, k), reason=reason, source=source,
                                                     lease_id=lease_id, lease_epoch=lease_epoch))
        events.publish(self.backend, ids=[k.eid])
        return reply

    def set_tags(self, eid: str, tags: dict[str, str]) -> int:
        """Add or overwrite `<caller>.<field>` tags (operations §3.2); returns the pair count."""
        return set_execution_tags(self.backend, eid, tags)

    def deliver_approval_signal(self, eid: str, *, lane_id: str, waitpoint_id: str, signal_name: str,
                                idempotency_suffix: str, **kw: Any) -> SignalOutcome:
        """An operator's approval (operations §6.8) with the stored token: the lane must match, a repeat
        with the same suffix answers `duplicate`. See Signals.deliver_approval for the options."""
        from ffcore.suspension.signals import Signals
        return Signals(self.backend).deliver_approval(eid, lane_id=lane_id, waitpoint_id=waitpoint_id,
                                                      signal_name=signal_name,
                                                      idempotency_suffix=idempotency_suffix, **kw)

    def change_priority(self, eid: str, priority: int) -> F.Reply:
        k = ExecKeys(eid)
        reply = self.backend.call(F.change_priority(k, lane=core_refs(self.backend, k).lane, priority=priority))
        events.publish(self.backend, ids=[k.eid])
        return reply

    def revoke_lease(self, eid: str, *, reason: str = "operator_revoke", expected_lease_id: str = "") -> F.Reply:
        k = ExecKeys(eid)
        reply = self.backend.call(F.revoke_lease(k, core_refs(self.backend, k), expected_lease_id=expected_lease_id,
                                                 reason=reason))
        if reply.status == "OK" and self.backend.upstream is None:
            # The library drops a revoked lease from I:lease_expiry; put it back as due now so workers'
            # reclaim sweeps find it at once instead of after the old lease's expiry time. Not on upstream's
            # keys (upstream mode writes them only through upstream's functions).
            self.backend.client.zadd(k.idx.lease_expiry, {k.eid: self.backend.now_ms()})
        events.publish(self.backend, ids=[k.eid])
        return reply

    def replay(self, eid: str) -> F.Reply:
        """Replay a terminal execution; a skipped flow member re-blocks on its inbound edges."""
        k = ExecKeys(eid)
        core = read_core(self.backend, k)
        lane = core.get("lane_id") or "default"
        edge_ids: list[str] | None = None
        if core.get("flow_id") and core.get("terminal_outcome") == "skipped":
            fk = FlowKeys(k.eid.partition_index, core["flow_id"])
            edge_ids = sorted(text(e) for e in self.backend.client.smembers(fk.incoming(k.eid)))
        reply = self.backend.call(F.replay_execution(k, lane=lane, now_ms=self.backend.now_ms(), edge_ids=edge_ids))
        events.publish(self.backend, ids=[k.eid])
        return reply

    def lanes(self) -> list[str]:
        return sorted(text(x) for x in self.backend.client.smembers(indexes(self.backend).lanes))

    def lane_partitions(self, lanes: list[str]) -> dict[str, list[int]]:
        """Partitions that hold executions of each lane (solo executions live on one; flow members on theirs)."""
        registry = indexes(self.backend).lane_partitions
        pipe = self.backend.client.pipeline(transaction=False)
        for lane in lanes:
            pipe.smembers(registry(lane))
        return {lane: sorted(int(text(x)) for x in raw) for lane, raw in zip(lanes, pipe.execute(), strict=True)}


def _eid_of(call: F.Call) -> ExecutionId:
    """The execution id a create call carries (ARGV[1]), parsed once by create_call."""
    eid = call.args[0]
    return eid if isinstance(eid, ExecutionId) else ExecutionId(str(eid))


def dumps_compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))
