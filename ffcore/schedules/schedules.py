"""`Client.schedules`: create, update, pause, resume, trigger, delete, list and read schedules, and fire the
due ones (the scanner's work).

One implementation per change: every door (REST, pages, `manage.py ffschedule`) calls these. A schedule
lives on its lane's partition, so each fire is ONE atomic FCALL (`ff_schedule_fire`) that advances the
schedule and creates the execution with the idempotency key `sched:<id>:<fire ms>`.
"""

from __future__ import annotations

import builtins
import dataclasses
import logging
import time
from typing import TYPE_CHECKING, Any

from ffcore import events, keys, routing, wake
from ffcore import functions as F
from ffcore.backoff import TRANSPORT
from ffcore.budgets import admission
from ffcore.execution import filter_index
from ffcore.ids import ExecutionId
from ffcore.keys import ExecKeys, SchedKeys
from ffcore.partition import lane_partition
from ffcore.reads import text

from .errors import Collect, ScheduleInvalid, ScheduleStateRefused
from .model import (
    DEFAULT_CATCHUP,
    Run,
    Schedule,
    Template,
    check_catchup,
    check_name,
    check_overlap,
    check_paused,
    check_template,
    mint_id,
    partition_of,
)
from .spec import Spec

if TYPE_CHECKING:
    from ffcore.execution.client import Client

log = logging.getLogger("ffcore.schedules")

#: A fire time later than this when its scanner gets to it counts as missed (the catch-up policy decides).
MISFIRE_GRACE_MS = 1000
#: Live topic of the schedule list (a schedule's own topic is its id).
TOPIC = "schedules"
_UNSET: Any = object()


def state_refusal(s: Schedule, action: str) -> str:
    """Why `action` does not apply to the schedule as it is ("" when it does): every door asks before acting,
    so a no-op is refused in words and leaves no audit entry."""
    if action == "pause" and s.paused:
        return f"Schedule {s.name} is already paused; nothing changed."
    if action == "resume" and not s.paused:
        return f"Schedule {s.name} is already active; nothing changed."
    return ""


def idempotency_key(schedule_id: str, fire_at: int) -> str:
    return f"sched:{schedule_id}:{fire_at}"


class Schedules:
    def __init__(self, client: Client) -> None:
        self.client = client
        self.backend = client.backend

    # ------------------------------------------------------------------ writes
    def create(self, *, name: str, kind: str, namespace: str = "default", cron: str | None = None,
               timezone: str | None = None, interval_ms: int | None = None, lane: str = "default",
               payload: str = "", priority: int = 0, tags: dict[str, str] | None = None,
               policy: dict[str, Any] | None = None, overlap: str = "allow", catchup: int | str = DEFAULT_CATCHUP,
               paused: bool = False, by: str = "client") -> Schedule:
        """Create a schedule; a refusal is a `ScheduleInvalid` naming every bad field, and writes nothing."""
        now = self.backend.now_ms()
        spec, fields = self.check(
            name=name, kind=kind, namespace=namespace, cron=cron, timezone=timezone, interval_ms=interval_ms,
            lane=lane, payload=payload, priority=priority, tags=tags, policy=policy, overlap=overlap, catchup=catchup,
            now_ms=now, paused=paused)
        fields.update({"paused": "1" if paused else "0", "created_at": str(now), "created_by": by,
                       "updated_at": str(now), "updated_by": by})
        n = lane_partition(lane, self.client.partitions)
        sid = fields["id"] = mint_id(n)
        names = keys.schedule_names(namespace)
        if not self.backend.client.hsetnx(names, name, sid):
            raise ScheduleInvalid("name", f"a schedule named {name!r} exists in namespace {namespace!r}")
        try:
            self.backend.call(F.schedule_put(SchedKeys(n, sid), expect="new", next_fire_at=spec.next_after(now),
                                             fields=fields))
        except BaseException:
            self.backend.client.hdel(names, name)
            raise
        pipe = self.backend.client.pipeline(transaction=False)
        pipe.zadd(keys.SCHEDULES_INDEX, {sid: now})
        pipe.sadd(keys.SCHEDULE_PARTITIONS, n)
        pipe.execute()
        self._changed(sid)
        return self._get_or_raise(sid)

    def check(self, *, name: str, kind: str, namespace: str = "default", cron: str | None = None,
              timezone: str | None = None, interval_ms: int | None = None, lane: str = "default",
              payload: str = "", priority: int = 0, tags: dict[str, str] | None = None,
              policy: dict[str, Any] | None = None, overlap: str = "allow", catchup: int | str = DEFAULT_CATCHUP,
              now_ms: int | None = None, schedule_id: str | None = None,
              paused: bool = False) -> tuple[Spec, dict[str, str]]:
        """Every check `create` makes, writing nothing (forms run it to show errors by field): the spec and the
        hash fields of the new schedule. The name must be free in its namespace (or be `schedule_id`'s own).
        Every bad field is reported at once (`ScheduleInvalid.errors`)."""
        found = Collect()
        with found.check():
            check_name(name)
        namespace_ok = isinstance(namespace, str) and namespace and not any(c in namespace for c in "{}: \t\r\n")
        if not namespace_ok:
            found.errors.append(("namespace", "must be non-empty without braces, colons or spaces"))
        now = self.backend.now_ms() if now_ms is None else now_ms
        spec: Spec | None = None
        with found.check():
            spec = Spec.build(cron=cron, timezone=timezone, interval_ms=interval_ms, anchor_ms=now)
        template = Template(kind, lane, payload, priority, dict(tags or {}), dict(policy or {}))
        with found.check():
            check_template(template, self.client.create_call)
        with found.check():
            check_overlap(overlap)
        with found.check():
            check_catchup(catchup)
        with found.check():
            check_paused(paused)
        if namespace_ok and not any(f == "name" for f, _ in found.errors):
            taken = self.backend.client.hget(keys.schedule_names(namespace), name)
            if taken is not None and text(taken) != schedule_id:
                found.errors.append(("name", f"a schedule named {name!r} exists in namespace {namespace!r}"))
        found.raise_any()
        assert spec is not None
        fields = {
            "id": "", "namespace": namespace, "name": name, **spec.as_fields(), "template": template.to_json(),
            "overlap": check_overlap(overlap), "catchup": str(check_catchup(catchup)),
            "fires": "0", "skipped": "0", "missed": "0", "last_eid": "",
        }
        return spec, fields

    def update(self, schedule_id: str, *, by: str = "client", name: str = _UNSET, cron: str | None = _UNSET,
               timezone: str | None = _UNSET, interval_ms: int | None = _UNSET, kind: str = _UNSET,
               lane: str = _UNSET, payload: str = _UNSET, priority: int = _UNSET,
               tags: dict[str, str] = _UNSET, policy: dict[str, Any] = _UNSET, overlap: str = _UNSET,
               catchup: int | str = _UNSET, expect_version: str | None = None) -> Schedule:
        """Change some fields (the others stay). A changed spec restarts the schedule's clock from now. The lane
        is fixed: it decides the partition the schedule and its executions live on."""
        s = self._get_or_raise(schedule_id)
        if lane is not _UNSET and lane != s.template.lane:
            raise ScheduleInvalid("template.lane", "a schedule's lane cannot change (it decides where the schedule "
                                                   "lives): create a new schedule")
        now = self.backend.now_ms()
        fields: dict[str, str] = {"updated_at": str(now), "updated_by": by}
        next_fire: int | str | None = "keep"
        found = Collect()
        if cron is not _UNSET or timezone is not _UNSET or interval_ms is not _UNSET:
            if cron is _UNSET and interval_ms is _UNSET:
                cron, interval_ms = s.spec.cron, s.spec.interval_ms
            with found.check():
                spec = Spec.build(cron=None if cron is _UNSET else cron,
                                  timezone=s.spec.timezone if timezone is _UNSET else timezone,
                                  interval_ms=None if interval_ms is _UNSET else interval_ms, anchor_ms=now)
                if (spec.cron, spec.timezone, spec.interval_ms) != (s.spec.cron, s.spec.timezone,
                                                                     s.spec.interval_ms):
                    fields.update(spec.as_fields())  # a changed spec restarts the clock; the same one keeps its times
                    next_fire = spec.next_after(now)
        t = s.template
        template = Template(t.kind if kind is _UNSET else kind, t.lane, t.payload if payload is _UNSET else payload,
                            t.priority if priority is _UNSET else priority,
                            t.tags if tags is _UNSET else dict(tags or {}),
                            t.policy if policy is _UNSET else dict(policy or {}))
        with found.check():
            check_template(template, self.client.create_call)
        fields["template"] = template.to_json()
        with found.check():
            if overlap is not _UNSET:
                fields["overlap"] = check_overlap(overlap)
        with found.check():
            if catchup is not _UNSET:
                fields["catchup"] = str(check_catchup(catchup))
        renamed = name is not _UNSET and name != s.name
        with found.check():
            if renamed:
                fields["name"] = check_name(name)
        found.raise_any()
        if renamed and not self.backend.client.hsetnx(keys.schedule_names(s.namespace), name, s.id):
            raise ScheduleInvalid("name", f"a schedule named {name!r} exists in namespace {s.namespace!r}")
        try:
            self.backend.call(F.schedule_put(SchedKeys(s.partition, s.id), expect=expect_version or s.version,
                                             next_fire_at=next_fire, fields=fields))
        except BaseException:
            if renamed:
                self.backend.client.hdel(keys.schedule_names(s.namespace), name)
            raise
        if renamed:
            self.backend.client.hdel(keys.schedule_names(s.namespace), s.name)
        self._changed(s.id)
        return self._get_or_raise(s.id)

    def pause(self, schedule_id: str, *, by: str = "client") -> Schedule:
        """Stop firing (the due entry goes); nothing fires until resume."""
        return self._set_paused(schedule_id, True, by)

    def resume(self, schedule_id: str, *, by: str = "client") -> Schedule:
        """Fire again from the next fire time after now (fire times that fell in the pause never run)."""
        return self._set_paused(schedule_id, False, by)

    def _set_paused(self, schedule_id: str, paused: bool, by: str) -> Schedule:
        s = self._get_or_raise(schedule_id)
        refused = state_refusal(s, "pause" if paused else "resume")
        if refused:
            raise ScheduleStateRefused("pause" if paused else "resume", refused)
        now = self.backend.now_ms()
        nxt: int | str | None = "keep" if paused else s.spec.next_after(now)
        self.backend.call(F.schedule_put(SchedKeys(s.partition, s.id), expect=s.version, next_fire_at=nxt, fields={
            "paused": "1" if paused else "0", "updated_at": str(now), "updated_by": by}))
        self._changed(s.id)
        return self._get_or_raise(s.id)

    def delete(self, schedule_id: str, *, by: str = "client") -> None:
        """Delete the schedule and its run records (executions it made stay)."""
        s = self._get_or_raise(schedule_id)
        self.backend.call(F.schedule_delete(SchedKeys(s.partition, s.id)))
        pipe = self.backend.client.pipeline(transaction=False)
        pipe.zrem(keys.SCHEDULES_INDEX, s.id)
        pipe.hdel(keys.schedule_names(s.namespace), s.name)
        pipe.execute()
        self._changed(s.id)

    def trigger(self, schedule_id: str, *, by: str = "client") -> str:
        """Fire now, outside the schedule's times (its next fire time stays); returns the execution id. Runs even
        while paused or while a previous run is active (overlap "cancel_previous" still cancels it)."""
        for _ in range(5):
            s = self._get_or_raise(schedule_id)
            # Two triggers in one millisecond would share an idempotency key: each takes its own fire time.
            at = max(self.backend.now_ms(), (s.last_fire_at or 0) + 1)
            status, eid = self._fire(s, "trigger", at, None, 0)
            if status == "TRIGGERED":
                return eid
        raise F.ScheduleConflict("schedule_conflict", ["the schedule kept changing; try again"], "ff_schedule_fire")

    # ------------------------------------------------------------------ reads
    def get(self, schedule_id: str) -> Schedule | None:
        n = partition_of(schedule_id)
        raw = self.backend.client.hgetall(SchedKeys(n, schedule_id).definition)
        if not raw:
            return None
        return Schedule.from_hash({text(k): text(v) for k, v in raw.items()})

    def _get_or_raise(self, schedule_id: str) -> Schedule:
        s = self.get(schedule_id)
        if s is None:
            raise F.ScheduleNotFound("schedule_not_found", [schedule_id])
        return s

    def list(self, *, namespace: str | None = None, limit: int = 500) -> builtins.list[Schedule]:
        """Every schedule (newest first), optionally of one namespace."""
        ids = [text(x) for x in self.backend.client.zrevrange(keys.SCHEDULES_INDEX, 0, limit - 1)]
        pipe = self.backend.client.pipeline(transaction=False)
        for sid in ids:
            pipe.hgetall(SchedKeys(partition_of(sid), sid).definition)
        out = []
        for raw in pipe.execute() if ids else []:
            if raw:
                s = Schedule.from_hash({text(k): text(v) for k, v in raw.items()})
                if namespace is None or s.namespace == namespace:
                    out.append(s)
        return out

    def by_name(self, name: str, namespace: str = "default") -> Schedule | None:
        sid = self.backend.client.hget(keys.schedule_names(namespace), name)
        return self.get(text(sid)) if sid else None

    def runs(self, schedule_id: str, limit: int = 20) -> builtins.list[Run]:
        """The latest run records, newest first, each with its execution's public state now."""
        n = partition_of(schedule_id)
        members = [text(m) for m in self.backend.client.zrevrange(SchedKeys(n, schedule_id).runs, 0, limit - 1)]
        runs = [Run.parse(m) for m in members]
        with_eid = [r for r in runs if r.execution_id]
        if not with_eid:
            return runs
        pipe = self.backend.client.pipeline(transaction=False)
        for r in with_eid:
            pipe.hget(ExecKeys(r.execution_id).core, "public_state")
        states = dict(zip((r.execution_id for r in with_eid), (text(x) if x else "" for x in pipe.execute()),
                          strict=True))
        return [Run(r.fire_at, r.outcome, r.execution_id, r.missed, states.get(r.execution_id, "")) for r in runs]

    def upcoming(self, schedule: Schedule, n: int = 5, *, now_ms: int | None = None) -> builtins.list[int]:
        """The next `n` fire times (none while paused)."""
        if schedule.paused or schedule.next_fire_at is None:
            return []
        now = self.backend.now_ms() if now_ms is None else now_ms
        first = schedule.next_fire_at
        if first < now - MISFIRE_GRACE_MS:  # overdue (no scanner running): what the clock says comes next
            first = schedule.spec.next_after(now)
        return [first, *schedule.spec.upcoming(first, n - 1)]

    # ------------------------------------------------------------------ firing (the scanner)
    def fire_due(self, partition: int, now_ms: int, batch: int = 100) -> int:
        """Fire every schedule of `partition` due at `now_ms`; returns how many executions were created.
        Safe to run in any number of processes at once: each fire is a compare-and-set."""
        due = [text(x) for x in self.backend.client.zrangebyscore(keys.schedules_due(partition), "-inf", now_ms,
                                                                  start=0, num=batch)]
        made = 0
        for sid in due:
            try:
                made += self.fire_schedule(sid, now_ms)
            except TRANSPORT:
                raise  # Valkey unreachable: the scanner's loop backs off
            except Exception:  # one schedule the engine refuses (e.g. its budget is gone) must not stop the others
                log.exception("schedule %s: fire failed", sid)
        return made

    def fire_schedule(self, schedule_id: str, now_ms: int) -> int:
        """Bring one schedule up to `now_ms`: its missed fire times (up to its catch-up limit, the latest ones),
        then the ones within MISFIRE_GRACE_MS. Stops when another process moved it first."""
        s = self.get(schedule_id)
        if s is None or s.paused or s.next_fire_at is None or s.next_fire_at > now_ms:
            return 0
        spec, first = s.spec, s.next_fire_at
        cutoff = now_ms - MISFIRE_GRACE_MS  # fire times before it are missed
        kept, dropped = spec.due(first, cutoff - 1, s.catchup)
        ontime_from = first if first >= cutoff else spec.next_after(cutoff - 1)
        ontime, _ = spec.due(ontime_from, now_ms, 1000)
        plan = kept + ontime
        made = 0
        expected = first
        if not plan:
            # Everything due was missed and the policy runs none of it: jump to the next time after now.
            self._fire(s, "advance", expected, spec.next_after(now_ms), dropped, expected_next=expected)
            return 0
        for i, at in enumerate(plan):
            new_next = plan[i + 1] if i + 1 < len(plan) else spec.next_after(at)
            while new_next <= at:  # never (fire times ascend); guards a spec bug from looping
                new_next = spec.next_after(new_next)
            status, eid = self._fire(s, "tick", at, new_next, dropped if i == 0 else 0, expected_next=expected)
            if status not in ("FIRED", "SKIPPED"):
                break
            made += status == "FIRED"
            expected = new_next
            if status == "FIRED":
                s = dataclasses.replace(s, last_eid=eid)
        return made

    def _fire(self, s: Schedule, mode: str, fire_at: int, new_next: int | None, missed: int, *,
              expected_next: int | None = None) -> tuple[str, str]:
        k = SchedKeys(s.partition, s.id)
        prev = s.last_eid
        if mode == "advance":
            reply = self.backend.call(F.schedule_fire(
                k, mode=mode, version=s.version, expected_next=str(expected_next), fire_at=fire_at, new_next=new_next,
                missed=missed, previous_eid=prev))
            self._changed(s.id)
            return reply.status, ""
        t = s.template
        eid = ExecutionId.mint(s.partition)
        policy = t.policy_object()
        create = self.client.create_call(
            kind=t.kind, lane=t.lane, namespace=s.namespace, payload=t.payload, priority=t.priority,
            idempotency_key=idempotency_key(s.id, fire_at), tags=t.tags, policy=policy, creator=f"schedule:{s.id}",
            execution_id=str(eid))
        policy_text = str(create.args[6])
        capable = routing.IndexBatch()  # ahead of the create, as Client.create does
        capable.add(s.partition, t.lane, routing.required_csv(policy_text), str(eid),
                    routing.eligible_score(int(create.args[4]), fire_at))
        if capable.entries:
            pipe = self.backend.client.pipeline(transaction=False)
            capable.queue(pipe)
            pipe.execute()
        try:
            reply = self.backend.call(F.schedule_fire(
                k, mode=mode, version=s.version, expected_next="" if expected_next is None else str(expected_next),
                fire_at=fire_at, new_next=new_next, missed=missed, previous_eid=prev, create=create,
                previous_core=ExecKeys(prev).core if prev else None))
        except BaseException:
            if capable.entries:
                pipe = self.backend.client.pipeline(transaction=False)
                capable.drop(pipe, {str(eid)})
                pipe.execute()
            raise
        made = reply.fields[0] if reply.fields else ""
        if made != str(eid) and capable.entries:
            pipe = self.backend.client.pipeline(transaction=False)
            capable.drop(pipe, {str(eid)})
            pipe.execute()
        if reply.status in ("FIRED", "TRIGGERED") and made == str(eid):
            self._after_create(s, eid, policy_text, reply.fields[1])
            if s.overlap == "cancel_previous" and prev:
                self._cancel_previous(s, prev)
        if reply.status in ("FIRED", "TRIGGERED", "SKIPPED"):
            self._changed(s.id)
        return reply.status, made

    def _after_create(self, s: Schedule, eid: ExecutionId, policy_text: str, public: str) -> None:
        """The side writes Client.create makes beside the contract's create: lane registry, admission fields, wake."""
        lane = s.template.lane
        pipe = self.backend.client.pipeline(transaction=False)
        pipe.sadd(keys.LANES_INDEX, lane)
        pipe.sadd(keys.lane_partitions(lane), eid.partition_index)
        if policy_text != "{}" and (attach := admission.core_fields(policy_text)):
            pipe.hset(ExecKeys(eid).core, mapping=attach)
        if public == "waiting":
            wake.announce(self.backend, {lane: {eid.partition_index}}, pipe)
        filter_index.add(pipe, eid, int(time.time() * 1000), s.template.kind, s.template.tags)
        pipe.execute()
        events.created(self.backend, [(str(eid), lane, s.template.kind)])

    def _cancel_previous(self, s: Schedule, prev: str) -> None:
        try:
            state = self.client.get_state(prev)
            if state is not None and not state.is_terminal:
                self.client.cancel(prev, reason=f"schedule {s.id}: overlap cancel_previous")
        except Exception:  # noqa: BLE001 - the new run is made; a previous one that ended meanwhile is fine
            log.info("schedule %s: previous run %s not cancelled", s.id, prev, exc_info=True)

    def _changed(self, schedule_id: str) -> None:
        events.publish(self.backend, topics=[TOPIC, schedule_id])

