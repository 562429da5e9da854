"""ff_issue_grant_and_claim and the operator's "take now" (#24 item 8, operations §4.7): the named execution
and no other is leased to `operator` in one call; an execution that is not eligible now is refused with the
engine's code and nothing is written."""

from __future__ import annotations

import pytest

from ffcore import functions as F
from ffcore.errors import InvalidId, ScriptError
from ffcore.ids import ExecutionId
from ffcore.keys import ExecKeys
from ffcore.policy import Policy
from ffcore.worker.grants import OPERATOR, issue_grant_and_claim
from ffcore.worker.worker import Registry, Worker, WorkerConfig
from tests.bounded import join
from tests.keyspace import MISSING_EID, changed, keyspace

from .invariants import LANE, attempt, check, claim, complete, create, grant, history_events, promote

TTL = 30_000


def test_it_takes_exactly_the_named_execution_not_the_queue_head(backend):
    head, named, tail = create(backend), create(backend), create(backend)
    taken = issue_grant_and_claim(backend, named, lease_duration_ms=TTL)
    assert (taken.lease_epoch, taken.attempt_index) == (1, 0)
    c = check(backend, named)
    assert (c["public_state"], c["current_worker_id"], c["current_worker_instance_id"]) == ("active", OPERATOR,
                                                                                          OPERATOR)
    assert c["current_lease_id"] == taken.lease_id and c["current_lease_epoch"] == "1"
    assert int(c["lease_expires_at"]) - int(c["lease_acquired_at"]) == TTL
    assert int(c["lease_renewal_deadline"]) - int(c["lease_acquired_at"]) == TTL * 2 // 3
    k = ExecKeys(named)
    assert not backend.client.exists(k.claim_grant)  # granted and consumed in the same call
    assert backend.client.sismember(k.idx.worker_leases(OPERATOR), named)
    assert attempt(backend, named, 0)["attempt_type"] == "initial"
    assert history_events(backend, named)[-1]["event"] == "acquired"
    for other in (head, tail):
        assert check(backend, other)["public_state"] == "waiting"


def test_it_ignores_capability_requirements_and_admission(backend):
    eid = create(backend, policy=Policy(required_capabilities=("gpu",)))
    issue_grant_and_claim(backend, eid, lease_duration_ms=TTL)
    assert check(backend, eid)["public_state"] == "active"


def test_an_interrupted_attempt_is_resumed_under_the_new_lease(backend):
    eid = create(backend)
    f = claim(backend, eid)
    backend.call(F.delay_execution(ExecKeys(eid), f, delay_until=backend.now_ms() + 10))
    promote(backend, eid, now_ms=backend.now_ms() + 100)
    assert check(backend, eid)["attempt_state"] == "attempt_interrupted"
    taken = issue_grant_and_claim(backend, eid, lease_duration_ms=TTL)
    assert (taken.attempt_index, taken.lease_epoch) == (0, 2)
    c = check(backend, eid)
    assert c["current_attempt_id"] == f.attempt_id and c["current_worker_id"] == OPERATOR
    assert attempt(backend, eid, 0)["attempt_state"] == "started"


@pytest.mark.parametrize("state,code", [
    ("missing", "execution_not_found"),
    ("completed", "execution_not_eligible"),
    ("active", "execution_not_eligible"),  # not runnable (lease_conflict: runnable yet owned)
    ("delayed", "execution_not_eligible"),
    ("granted", "grant_already_exists"),
    ("off_set", "execution_not_in_eligible_set"),
])
def test_a_non_eligible_execution_is_refused_with_its_code_and_nothing_is_written(backend, state, code):
    eid = MISSING_EID if state == "missing" else create(
        backend, **({"delay_until": backend.now_ms() + 60_000} if state == "delayed" else {}))
    if state == "completed":
        complete(backend, eid, claim(backend, eid))
    elif state == "active":
        claim(backend, eid)
    elif state == "granted":
        grant(backend, eid)
    elif state == "off_set":
        backend.client.zrem(ExecKeys(eid).lane(LANE).eligible, eid)
    before = keyspace(backend)
    with pytest.raises(ScriptError) as e:
        issue_grant_and_claim(backend, eid, lease_duration_ms=TTL)
    assert e.value.code == code
    assert changed(before, keyspace(backend)) == []


def test_bad_input_is_refused_before_any_call(backend):
    eid = create(backend)
    before = keyspace(backend)
    for bad in (0, 999, 3_600_001, True):
        with pytest.raises(ValueError, match="lease_duration_ms"):
            issue_grant_and_claim(backend, eid, lease_duration_ms=bad)
    with pytest.raises(InvalidId):
        issue_grant_and_claim(backend, "not-an-id", lease_duration_ms=TTL)
    call = F.issue_grant_and_claim(ExecKeys(eid), lane=LANE, worker_id=OPERATOR, worker_instance_id=OPERATOR,
                                   lease_id="l", attempt_id="a", lease_ttl_ms=TTL, attempt_policy_json="[1")
    with pytest.raises(ScriptError, match="attempt_policy_json"):
        backend.call(call)
    assert changed(before, keyspace(backend)) == []


def test_a_taken_execution_whose_lease_runs_out_is_reclaimed_by_a_worker(backend):
    eid = create(backend)
    issue_grant_and_claim(backend, eid, lease_duration_ms=1_000)
    w = Worker(backend, WorkerConfig(worker_instance_id="w-after-take", worker_id="w-after-take"), Registry())
    assert w.claim_next(1) == []  # the operator holds it
    backend.client.hset(ExecKeys(eid).core, "lease_expires_at", backend.now_ms() - 1)  # as if a second passed
    backend.client.zadd(ExecKeys(eid).idx.lease_expiry, {eid: backend.now_ms() - 1})
    (task,) = w.reclaim(1)
    assert task.execution_id == eid and task.attempt_type == "reclaim"
    task.complete(b"ok")
    assert check(backend, eid)["public_state"] == "completed"


def test_it_leaves_what_the_contract_grant_and_claim_pair_leaves(backend):
    from .invariants import core

    taken, paired = create(backend), create(backend)
    issue_grant_and_claim(backend, taken, lease_duration_ms=TTL)
    grant(backend, paired, worker_id=OPERATOR, wiid=OPERATOR)
    backend.call(F.claim_execution(ExecKeys(paired), lane=LANE, worker_id=OPERATOR, worker_instance_id=OPERATOR,
                                   lease_id="l", attempt_id="a", lease_ttl_ms=TTL))

    def shape(eid: str) -> tuple[set[str], dict[str, str]]:
        k, lk = ExecKeys(eid), ExecKeys(eid).lane(LANE)
        names = {n.decode().replace(ExecutionId(eid).uuid, "<eid>") for n in backend.client.keys(f"*{eid}*")}
        names |= {f"in {z}" for z in (lk.eligible, lk.active, k.idx.lease_expiry, k.idx.attempt_timeout)
                  if backend.client.zscore(z, eid) is not None}
        names |= {"in worker leases"} if backend.client.sismember(k.idx.worker_leases(OPERATOR), eid) else set()
        varying = ("execution_id", "created_at", "last_transition_at", "last_mutation_at", "started_at",
                   "lease_acquired_at", "lease_expires_at", "lease_last_renewed_at", "lease_renewal_deadline",
                   "current_attempt_id", "current_lease_id", "partition_id")
        tag = f"{{fp:{ExecutionId(eid).partition_index}}}"  # the two may live on different partitions
        return ({n.replace(tag, "{fp:N}") for n in names},
                {k: v for k, v in core(backend, eid).items() if k not in varying})

    t_names, t_core = shape(taken)
    p_names, p_core = shape(paired)
    assert t_core == p_core
    assert t_names == p_names and "in worker leases" in t_names
    assert not backend.client.exists(ExecKeys(taken).claim_grant)


def test_of_two_concurrent_takes_exactly_one_wins(backend):
    import threading

    eid = create(backend)
    outcomes: list[str] = []
    barrier = threading.Barrier(4)

    def take() -> None:
        barrier.wait()
        try:
            issue_grant_and_claim(backend, eid, lease_duration_ms=TTL)
            outcomes.append("taken")
        except ScriptError as e:
            outcomes.append(e.code)

    threads = [threading.Thread(target=take, daemon=True) for _ in range(4)]
    for t in threads:
        t.start()
    join(threads)
    assert sorted(outcomes) == ["execution_not_eligible"] * 3 + ["taken"]
    assert check(backend, eid)["current_lease_epoch"] == "1"
