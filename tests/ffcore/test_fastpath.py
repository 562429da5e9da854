"""Fast-path functions (lua/fastpath.lua): ff_claim_next and ff_complete_batch_and_claim leave exactly the
keys that the contract's grant + claim / complete leave, refuse bad input before writing, and hand back
what they must not claim themselves."""

from __future__ import annotations

import json
import re
import threading
import time
from typing import Any

from ffcore import functions as F
from ffcore import keys
from ffcore.execution.client import Client
from ffcore.ids import new_uuid
from ffcore.keys import ExecKeys
from ffcore.partition import lane_partition
from ffcore.policy import Backoff, Policy, RetryPolicy
from ffcore.reads import decode_map, text
from ffcore.worker.worker import Registry, Worker, WorkerConfig

from .invariants import LANE, WIID, WORKER, check, claim, complete, create, fail, promote, raises

_TS = re.compile(r"\b1\d{12}\b")


def _norm(value: Any, subs: dict[str, str]) -> Any:
    s = text(value) if isinstance(value, bytes) else str(value)
    for old, new in subs.items():
        s = s.replace(old, new)
    return _TS.sub("T", s)


def snapshot(backend, eid: str, subs: dict[str, str]) -> dict[str, Any]:
    """Every key of `eid` (contents) and its membership in every other key, normalized: ids and
    millisecond timestamps replaced by placeholders, stream entry ids dropped."""
    c = backend.client
    uuid = eid.split(":", 1)[1]
    subs = {eid: "EID", uuid: "UUID", **subs}
    out: dict[str, Any] = {}
    for raw in c.scan_iter(count=1000):
        key = text(raw)
        kind = text(c.type(raw))
        if uuid in key:
            name = _norm(key, subs)
            if kind == "hash":
                out[name] = {_norm(f, subs): _norm(v, subs) for f, v in c.hgetall(raw).items()}
            elif kind == "string":
                out[name] = _norm(c.get(raw), subs)
            elif kind == "stream":
                out[name] = [{_norm(f, subs): _norm(v, subs) for f, v in fields.items()}
                             for _id, fields in c.xrange(raw)]
            elif kind == "zset":
                out[name] = [(_norm(m, subs), _norm(int(s), subs)) for m, s in c.zrange(raw, 0, -1, withscores=True)]
            elif kind == "set":
                out[name] = sorted(_norm(m, subs) for m in c.smembers(raw))
        elif kind == "zset":
            score = c.zscore(raw, eid)
            if score is not None:
                out[key] = _norm(int(score), subs)
        elif kind == "set" and c.sismember(raw, eid):
            out[key] = "member"
    return out


def claim_next(backend, n: int = 1, *, lane: str = LANE, caps: str = "", ids: list[tuple[str, str]] | None = None):
    part = lane_partition(lane, backend.settings.partitions.flow)
    call = F.claim_next(part, lane=lane, worker_id=WORKER, worker_instance_id=WIID, capabilities_csv=caps,
                        lease_ttl_ms=30_000, ids=ids or [(new_uuid(), new_uuid()) for _ in range(n)])
    return backend.call(call).raw[0]


def contract_claim(backend, eid: str, lease_id: str, attempt_id: str, policy: dict[str, Any] | None = None):
    """What the Python claimer's contract path does: grant + claim (attempt timeout from the policy)."""
    ato = ((policy or {}).get("timeout_policy") or {}).get("attempt_timeout_ms")
    return claim(backend, eid, lease_id=lease_id, attempt_id=attempt_id, attempt_timeout_ms=ato)


def _fresh_pair(backend, **create_kw):
    """Two identical executions; the first is claimed by the contract path, the second by ff_claim_next."""
    return create(backend, **create_kw), create(backend, **create_kw)


def test_claim_next_leaves_the_same_keys_as_grant_plus_claim(backend):
    policy = Policy(attempt_timeout_ms=60_000)
    kw = {"payload": b"\x00\xffpayload", "tags": {"team": "x"}, "policy": policy}
    a, b = _fresh_pair(backend, **kw)
    contract_claim(backend, a, "LID-A", "AID-A", policy.as_json())
    got = claim_next(backend, ids=[("LID-B", "AID-B")])
    assert [c.execution_id for c in got.claimed] == [b] and got.slow == []
    c = got.claimed[0]
    assert (c.lease_id, c.lease_epoch, c.attempt_id, c.attempt_index, c.attempt_type) == ("LID-B", 1, "AID-B", 0,
                                                                                          "initial")
    assert c.payload == b"\x00\xffpayload" and c.tags == {"team": "x"} and c.kind == "job"
    assert json.loads(c.policy_json) == policy.as_json()
    check(backend, a)
    check(backend, b)
    assert snapshot(backend, a, {"LID-A": "LID", "AID-A": "AID"}) == snapshot(backend, b, {"LID-B": "LID",
                                                                                         "AID-B": "AID"})


def test_claim_next_claims_a_retry_attempt_like_the_contract(backend):
    retry = Policy(retry=RetryPolicy(max_retries=2, backoff=Backoff(kind="fixed", delay_ms=1)))
    a, b = _fresh_pair(backend, policy=retry)
    first: dict[str, F.Fence] = {}
    for eid in (a, b):
        first[eid] = f = claim(backend, eid)
        fail(backend, eid, f, retry_policy_json=json.dumps(retry.as_json()["retry_policy"]))
    time.sleep(0.01)  # the 1 ms backoff is due
    for eid in (a, b):
        promote(backend, eid)
    contract_claim(backend, a, "LID-A", "AID-A")
    got = claim_next(backend, ids=[("LID-B", "AID-B")])
    assert [(x.execution_id, x.attempt_type, x.attempt_index) for x in got.claimed] == [(b, "retry", 1)]
    old = {e: {first[e].lease_id: "OLD-LID", first[e].attempt_id: "OLD-AID"} for e in (a, b)}
    assert snapshot(backend, a, {"LID-A": "LID", "AID-A": "AID", **old[a]}) == snapshot(
        backend, b, {"LID-B": "LID", "AID-B": "AID", **old[b]})


def test_claim_next_resumes_an_interrupted_attempt_like_claim_resumed(backend):
    a, b = _fresh_pair(backend)
    first: dict[str, F.Fence] = {}
    for eid in (a, b):
        f = claim(backend, eid)
        first[eid] = f
        backend.call(F.delay_execution(ExecKeys(eid), f, delay_until=backend.now_ms() - 1))
        promote(backend, eid)
        check(backend, eid)
    k = ExecKeys(a)
    backend.call(F.issue_claim_grant(k, lane=LANE, worker_id=WORKER, worker_instance_id=WIID))
    backend.call(F.claim_resumed_execution(k, lane=LANE, worker_id=WORKER, worker_instance_id=WIID, lease_id="LID-R",
                                           lease_ttl_ms=30_000, attempt_index=0))
    got = claim_next(backend, ids=[("LID-S", "unused")])
    assert [(x.execution_id, x.attempt_type, x.attempt_id) for x in got.claimed] == [(b, "resumed",
                                                                                       first[b].attempt_id)]
    check(backend, b)
    subs_a = {"LID-R": "LID", first[a].lease_id: "OLD", first[a].attempt_id: "AID"}
    subs_b = {"LID-S": "LID", first[b].lease_id: "OLD", first[b].attempt_id: "AID"}
    assert snapshot(backend, a, subs_a) == snapshot(backend, b, subs_b)


def test_claim_next_claims_in_priority_then_fifo_order_and_at_most_n(backend):
    low = []
    for _ in range(3):
        low.append(create(backend))
        time.sleep(0.003)  # FIFO is by created_at milliseconds: ties order by id
    high = create(backend, priority=5)
    got = claim_next(backend, 3)
    assert [c.execution_id for c in got.claimed] == [high, low[0], low[1]]
    assert Client(backend).get_state(low[2]) == "waiting"
    for e in [high, *low]:
        check(backend, e)


def test_claim_next_hands_back_what_needs_admission_or_another_worker(backend):
    # Served in eligible order, FIFO by the creation millisecond, and two creates often share one (then the random
    # ids decide): a higher priority puts `budgeted` first whatever the clock says.
    budgeted = create(backend, priority=1, policy=Policy(budget_ids=("6f1e0b6c-1f1e-4c3a-9a57-3c1b1b1b1b1b",)))
    gpu = create(backend, policy=Policy(required_capabilities=("gpu",)))
    plain = create(backend)
    before = {e: snapshot(backend, e, {}) for e in (budgeted, gpu)}
    got = claim_next(backend, 3)
    assert [c.execution_id for c in got.claimed] == [plain]
    # gpu is in its capability index (ffcore's create wrote it): left for a capable worker, not handed back.
    assert got.slow == [budgeted]
    assert {e: snapshot(backend, e, {}) for e in (budgeted, gpu)} == before  # untouched
    index = keys.PartitionKeys(gpu.partition_index).lane(LANE).capable("gpu")
    backend.client.zrem(index, gpu)  # as if created by another client: the contract's route path
    assert claim_next(backend, 3).slow == [budgeted, gpu]
    backend.client.zadd(index, {gpu: 0})
    got = claim_next(backend, 1, caps="gpu,ssd")
    assert got.slow == [budgeted] and [c.execution_id for c in got.claimed] == [gpu]
    assert backend.client.zcard(index) == 0  # a claim prunes the capability index


def test_claim_next_skips_an_execution_with_an_outstanding_grant(backend):
    granted = create(backend)
    backend.call(F.issue_claim_grant(ExecKeys(granted), lane=LANE, worker_id="other", worker_instance_id="other-1"))
    free = create(backend)
    got = claim_next(backend, 2)
    assert [c.execution_id for c in got.claimed] == [free] and got.slow == []
    assert Client(backend).get_state(granted) == "waiting"


def test_claim_next_refuses_bad_arguments_before_writing_anything(backend):
    eid = create(backend)
    before = snapshot(backend, eid, {})
    part = lane_partition(LANE, backend.settings.partitions.flow)
    good = F.claim_next(part, lane=LANE, worker_id=WORKER, worker_instance_id=WIID, capabilities_csv="",
                        lease_ttl_ms=30_000, ids=[("l", "a")])
    for args in (good.args[:4] + ["soon"] + good.args[5:], good.args[:6] + [2] + good.args[7:],
                 good.args[:6] + [65] + good.args[7:]):
        raises("invalid_input", lambda args=args: backend.call(F.Call(good.function, good.keys, args, good.parse)))
    assert snapshot(backend, eid, {}) == before


def test_a_batch_of_one_completes_like_complete_and_claims_the_next(backend):
    a, b = create(backend), create(backend)
    fa, fb = claim(backend, a), claim(backend, b)
    nxt = create(backend)
    complete(backend, a, fa, b"result")
    reply = backend.call(F.complete_batch_and_claim([(ExecKeys(b), fb, b"result")], worker_id=WORKER,
                                                    capabilities_csv="", lease_ttl_ms=30_000, ids=[("LID-N", "AID-N")]))
    assert reply.raw[0].outcomes == [None]
    assert [c.execution_id for c in reply.raw[0].claimed] == [nxt]
    for e in (a, b, nxt):
        check(backend, e)
    assert snapshot(backend, a, {fa.lease_id: "LID", fa.attempt_id: "AID"}) == snapshot(
        backend, b, {fb.lease_id: "LID", fb.attempt_id: "AID"})
    assert decode_map(backend.client.hgetall(ExecKeys(nxt).core))["current_lease_id"] == "LID-N"


def test_a_batch_of_one_with_a_stale_fence_claims_nothing(backend):
    eid = create(backend)
    f = claim(backend, eid)
    waiting = create(backend)
    stale = F.Fence("not-the-lease", f.lease_epoch, f.attempt_id, f.attempt_index, WIID, LANE)
    got = backend.call(F.complete_batch_and_claim([(ExecKeys(eid), stale, b"")], worker_id=WORKER,
                                                  capabilities_csv="", lease_ttl_ms=30_000, ids=[("l", "a")])).raw[0]
    assert [e.code for e in got.outcomes] == ["stale_lease"] and got.claimed == []
    assert Client(backend).get_state(waiting) == "waiting"
    assert Client(backend).get_state(eid) == "active"
    check(backend, eid)


def test_a_worker_drains_a_lane_through_the_fast_path_exactly_once(backend):
    client = Client(backend)
    eids = [r.execution_id for r in client.create_many([{"kind": "job", "lane": "fast"} for _ in range(60)])]
    seen: list[str] = []
    reg = Registry()

    @reg.handler("job")
    def run(task) -> str:
        seen.append(task.execution_id)
        return "ok"

    w = Worker(backend, WorkerConfig(lanes=("fast",), concurrency=4, poll_interval_ms=20), reg)
    t = threading.Thread(target=w.run, kwargs={"install_signal_handlers": False})
    t.start()
    deadline = time.monotonic() + 20
    while len(seen) < len(eids) and time.monotonic() < deadline:
        time.sleep(0.02)
    w.stop()
    t.join(timeout=10)
    assert sorted(seen) == sorted(eids)
    for e in eids:
        c = check(backend, e)
        assert c["public_state"] == "completed" and c["total_attempt_count"] == "1"


def test_claim_next_consumes_a_live_grant_of_the_same_worker_id(backend):
    # A replica of this worker (same worker_id) issued the grant: the contract's claim would consume it.
    eid = create(backend)
    backend.call(F.issue_claim_grant(ExecKeys(eid), lane=LANE, worker_id=WORKER, worker_instance_id="replica"))
    got = claim_next(backend)
    assert [c.execution_id for c in got.claimed] == [eid]
    assert not backend.client.exists(ExecKeys(eid).claim_grant)
    check(backend, eid)


def test_a_worker_claims_work_outside_the_lane_registry(backend):
    # Executions created by another client (no lane registry entry) are found by the ring probe.
    eid = create(backend, lane="unregistered")
    backend.client.delete(keys.lane_partitions("unregistered"))
    w = Worker(backend, WorkerConfig(lanes=("unregistered",), worker_id=WORKER))
    assert [t.execution_id for t in w.claim_next(2)] == [eid]
    check(backend, eid)
