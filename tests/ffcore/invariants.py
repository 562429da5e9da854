"""Shared invariant checker and small drivers for the execution-lifecycle tests.

`check(backend, eid)` is called after every step of every lifecycle test. It asserts:

- the stored state vector parses and its public state is the derived one (`StateVector.is_consistent`);
- the execution is a member of exactly the lane index `expected_lane_index()` names (all ten lane
  indexes of its lane are inspected), and of `I:all_executions`;
- lease fields agree with ownership: `leased` ⇒ a non-empty `current_lease_id`, `E:lease:current` exists
  and names the same lease/epoch, the eid is in `I:lease_expiry` at `lease_expires_at` and in its
  worker's lease set; `unowned` ⇒ `current_lease_id` empty, no `E:lease:current`, not in `I:lease_expiry`;
- a terminal execution is in none of the timeout/deadline/lease-expiry indexes.

The drivers issue the real FCALLs from `ffcore.functions`; key names always come from `ffcore.keys`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from ffcore import functions as F
from ffcore.backend import Backend
from ffcore.errors import ERRORS, ScriptError
from ffcore.execution.client import Client
from ffcore.ids import ExecutionId, new_uuid
from ffcore.keys import LANE_STATE_INDEXES, ExecKeys
from ffcore.reads import core_refs, decode_map
from ffcore.state import LifecyclePhase, OwnershipState, StateVector, expected_lane_index

LANE = "default"
WORKER = "worker-a"
WIID = "worker-a-1"
OTHER_WORKER = "worker-b"
OTHER_WIID = "worker-b-1"


def core(backend: Backend, eid: str) -> dict[str, str]:
    return decode_map(backend.client.hgetall(ExecKeys(eid).core))


def lane_memberships(backend: Backend, eid: str, lane: str) -> set[str]:
    lk = ExecKeys(eid).lane(lane)
    pipe = backend.client.pipeline(transaction=False)
    for suffix in LANE_STATE_INDEXES:
        pipe.zscore(lk.index(suffix), eid)
    return {s for s, score in zip(LANE_STATE_INDEXES, pipe.execute(), strict=True) if score is not None}


def check(backend: Backend, eid: str) -> dict[str, str]:
    """Assert every lifecycle invariant for `eid`; returns its core hash for further asserts.

    Two round trips (it runs after every step of the model test): what needs no field of E:core, then the
    lane indexes and the worker's lease set that E:core names."""
    k = ExecKeys(eid)
    pipe = backend.client.pipeline(transaction=False)
    pipe.hgetall(k.core)
    pipe.sismember(k.idx.all_executions, eid)
    pipe.hgetall(k.lease_current)
    for key in (k.idx.lease_expiry, k.idx.attempt_timeout, k.idx.execution_deadline):
        pipe.zscore(key, eid)
    raw_core, in_all, raw_lease, in_expiry, in_timeout, in_deadline = pipe.execute()
    c = decode_map(raw_core)
    assert c, f"{eid}: E:core is missing"
    sv = StateVector.from_core(c)
    assert sv.is_consistent, f"{eid}: public_state {sv.public_state} != derived {sv.derived_public_state}: {c}"

    lane = c.get("lane_id") or "default"
    lk = k.lane(lane)
    pipe = backend.client.pipeline(transaction=False)
    for suffix in LANE_STATE_INDEXES:
        pipe.zscore(lk.index(suffix), eid)
    leased = sv.ownership_state is OwnershipState.LEASED
    if leased:
        pipe.sismember(k.idx.worker_leases(c["current_worker_instance_id"]), eid)
    found = pipe.execute()
    members = {s for s, score in zip(LANE_STATE_INDEXES, found[:len(LANE_STATE_INDEXES)], strict=True)
               if score is not None}
    expected = expected_lane_index(sv.lifecycle_phase, sv.eligibility_state)
    assert members == ({expected} if expected else set()), (
        f"{eid}: in lane indexes {sorted(members)}, expected {expected!r} for {sv.as_dict()}")
    assert in_all

    lease = decode_map(raw_lease)
    if leased:
        assert c.get("current_lease_id"), f"{eid}: leased without current_lease_id"
        assert lease, f"{eid}: leased without E:lease:current"
        assert lease["lease_id"] == c["current_lease_id"]
        assert lease["lease_epoch"] == c["current_lease_epoch"]
        assert lease["attempt_id"] == c["current_attempt_id"]
        assert in_expiry is not None and int(in_expiry) == int(c["lease_expires_at"])
        assert found[-1], f"{eid}: not in its worker's lease set"
        assert c.get("attempt_state") == "running_attempt"
    elif sv.ownership_state is OwnershipState.UNOWNED:
        assert c.get("current_lease_id", "") == "", f"{eid}: unowned but current_lease_id={c['current_lease_id']}"
        assert not lease, f"{eid}: unowned but E:lease:current exists"
        assert in_expiry is None, f"{eid}: unowned but still in I:lease_expiry"
    else:  # expired / revoked: still active, waiting for a reclaim
        assert sv.lifecycle_phase is LifecyclePhase.ACTIVE
        assert c.get("attempt_state") == "attempt_interrupted"

    if sv.lifecycle_phase is LifecyclePhase.TERMINAL:
        for key, score in ((k.idx.attempt_timeout, in_timeout), (k.idx.execution_deadline, in_deadline),
                           (k.idx.lease_expiry, in_expiry)):
            assert score is None, f"{eid}: terminal but still in {key}"
        assert c.get("completed_at"), f"{eid}: terminal without completed_at"
    return c


# ------------------------------------------------------------------ drivers
def create(backend: Backend, **kw: Any) -> ExecutionId:
    kw.setdefault("kind", "job")
    eid = Client(backend).create(**kw).execution_id
    check(backend, eid)
    return eid


def grant(backend: Backend, eid: str, *, worker_id: str = WORKER, wiid: str = WIID, lane: str = LANE,
          **kw: Any) -> F.Reply:
    return backend.call(F.issue_claim_grant(ExecKeys(eid), lane=lane, worker_id=worker_id,
                                            worker_instance_id=wiid, **kw))


def claim_call(eid: str, *, worker_id: str = WORKER, wiid: str = WIID, lane: str = LANE, ttl_ms: int = 30_000,
               lease_id: str | None = None, attempt_id: str | None = None, **kw: Any) -> F.Call:
    return F.claim_execution(ExecKeys(eid), lane=lane, worker_id=worker_id, worker_instance_id=wiid,
                             lease_id=lease_id or new_uuid(), attempt_id=attempt_id or new_uuid(),
                             lease_ttl_ms=ttl_ms, **kw)


def fence_of(reply: F.Reply, *, wiid: str = WIID, lane: str = LANE) -> F.Fence:
    lease_id, epoch, _expires, attempt_id, attempt_index = reply.fields[:5]
    return F.Fence(lease_id, int(epoch), attempt_id, int(attempt_index), wiid, lane)


def claim(backend: Backend, eid: str, *, worker_id: str = WORKER, wiid: str = WIID, lane: str = LANE,
          ttl_ms: int = 30_000, **kw: Any) -> F.Fence:
    """Grant + claim (fresh/retry/replay attempt); returns the holder's fence."""
    grant(backend, eid, worker_id=worker_id, wiid=wiid, lane=lane)
    reply = backend.call(claim_call(eid, worker_id=worker_id, wiid=wiid, lane=lane, ttl_ms=ttl_ms, **kw))
    check(backend, eid)
    return fence_of(reply, wiid=wiid, lane=lane)


def reclaim(backend: Backend, eid: str, *, worker_id: str = OTHER_WORKER, wiid: str = OTHER_WIID,
            lane: str = LANE, ttl_ms: int = 30_000, with_grant: bool = True) -> F.Reply:
    k = ExecKeys(eid)
    if with_grant:
        backend.call(F.issue_reclaim_grant(k, lane=lane, worker_id=worker_id, worker_instance_id=wiid))
    refs = core_refs(backend, k)
    total = int(core(backend, eid).get("total_attempt_count") or 0)
    return backend.call(F.reclaim_execution(k, refs, lane=lane, worker_id=worker_id, worker_instance_id=wiid,
                                            lease_id=new_uuid(), attempt_id=new_uuid(), lease_ttl_ms=ttl_ms,
                                            next_attempt_index=total))


def complete(backend: Backend, eid: str, f: F.Fence, result: bytes = b"") -> F.Reply:
    return backend.call(F.complete_execution(ExecKeys(eid), f, result))


def fail(backend: Backend, eid: str, f: F.Fence, *, reason: str = "boom", category: str = "",
         retry_policy_json: str = "") -> F.Reply:
    return backend.call(F.fail_execution(ExecKeys(eid), f, reason=reason, category=category,
                                         retry_policy_json=retry_policy_json))


def expire(backend: Backend, eid: str, reason: str = "attempt_timeout") -> F.Reply:
    k = ExecKeys(eid)
    return backend.call(F.expire_execution(k, core_refs(backend, k), reason=reason))


def promote(backend: Backend, eid: str, *, lane: str = LANE, now_ms: int | None = None) -> F.Reply:
    k = ExecKeys(eid)
    return backend.call(F.promote_delayed(k, k.lane(lane), now_ms=backend.now_ms() if now_ms is None else now_ms))


def raises(code: str, fn: Callable[[], Any]) -> ScriptError:
    """Run `fn`, assert it raised the typed error for `code`, return it."""
    with pytest.raises(ERRORS[code]) as info:
        fn()
    assert info.value.code == code
    return info.value


def attempt(backend: Backend, eid: str, i: int) -> dict[str, str]:
    return decode_map(backend.client.hgetall(ExecKeys(eid).attempt(i)))


def history_events(backend: Backend, eid: str) -> list[dict[str, str]]:
    """The lease history as dicts, oldest first; the event name is under `event` when stored."""
    return [decode_map(fields) for _id, fields in backend.client.xrange(ExecKeys(eid).lease_history)]


def zscore(backend: Backend, key: str, eid: str) -> float | None:
    v = backend.client.zscore(key, eid)
    return None if v is None else float(v)


def fixed_retry(max_retries: int, delay_ms: int = 1) -> str:
    return json.dumps({"max_retries": max_retries, "backoff": {"type": "fixed", "delay_ms": delay_ms}})

