"""ff_delay_execution, ff_move_to_waiting_children and ff_promote_delayed."""

from ffcore import functions as F
from ffcore.execution.client import Client
from ffcore.ids import ExecutionId
from ffcore.keys import ExecKeys
from ffcore.worker.worker import Registry, Worker, WorkerConfig

from .invariants import (
    LANE,
    WIID,
    attempt,
    check,
    claim,
    claim_call,
    create,
    grant,
    history_events,
    promote,
    raises,
    zscore,
)


def _delay(backend, eid, f, until):
    return backend.call(F.delay_execution(ExecKeys(eid), f, delay_until=until))


def test_a_worker_delay_releases_the_lease_and_parks_the_attempt(backend):
    eid = create(backend)
    f = claim(backend, eid, attempt_timeout_ms=60_000)
    until = backend.now_ms() + 60_000
    assert _delay(backend, eid, f, until).fields == [str(until)]
    c = check(backend, eid)
    k = ExecKeys(eid)
    assert c["lifecycle_phase"] == "runnable" and c["public_state"] == "delayed"
    assert c["blocking_reason"] == "waiting_for_delay" and c["blocking_detail"] == f"delayed until {until}"
    assert c["attempt_state"] == "attempt_interrupted" and c["delay_until"] == str(until)
    assert zscore(backend, k.lane(LANE).delayed, eid) == until
    assert zscore(backend, k.idx.attempt_timeout, eid) is None
    assert not backend.client.sismember(k.idx.worker_leases(WIID), eid)
    a = attempt(backend, eid, 0)
    assert (a["attempt_state"], a["suspension_id"]) == ("suspended", "worker_delay")
    assert history_events(backend, eid)[-1]["reason"] == "worker_delay"


def test_a_delayed_attempt_is_resumed_by_the_next_claim(backend):
    eid = create(backend)
    f = claim(backend, eid)
    _delay(backend, eid, f, backend.now_ms() + 50)
    promote(backend, eid, now_ms=backend.now_ms() + 100)
    c = check(backend, eid)
    assert c["public_state"] == "waiting" and c["attempt_state"] == "attempt_interrupted"
    assert c["delay_until"] == ""
    # the fresh-claim function refuses; the worker's claimer uses the resumed path
    grant(backend, eid)
    raises("use_claim_resumed_execution", lambda: backend.call(claim_call(eid)))
    check(backend, eid)
    backend.client.delete(ExecKeys(eid).claim_grant)
    (task,) = Worker(backend, WorkerConfig(worker_instance_id="w-res"), Registry()).claim_next(1)
    assert task.attempt_index == 0 and task.attempt_id == f.attempt_id  # same attempt continues
    assert task.lease_epoch == 2
    c = check(backend, eid)
    assert c["total_attempt_count"] == "1"
    task.complete("done")
    assert check(backend, eid)["public_state"] == "completed"


def test_moving_to_waiting_children_blocks_on_dependencies(backend):
    eid = create(backend)
    f = claim(backend, eid)
    assert backend.call(F.move_to_waiting_children(ExecKeys(eid), f)).status == "OK"
    c = check(backend, eid)
    assert c["eligibility_state"] == "blocked_by_dependencies" and c["public_state"] == "waiting_children"
    assert c["blocking_reason"] == "waiting_for_children"
    assert c["blocking_detail"] == "waiting for child executions to complete"
    assert zscore(backend, ExecKeys(eid).lane(LANE).blocked_dependencies, eid) == int(c["created_at"])
    a = attempt(backend, eid, 0)
    assert (a["attempt_state"], a["suspension_id"]) == ("suspended", "waiting_children")
    assert history_events(backend, eid)[-1]["reason"] == "waiting_children"


def test_the_task_helpers_delay_and_wait_for_children(backend):
    client = Client(backend)
    a = client.create(kind="a").execution_id
    b = client.create(kind="b").execution_id
    worker = Worker(backend, WorkerConfig(worker_instance_id="w-d"), Registry())
    tasks = {t.execution_id: t for t in worker.claim_next(2)}
    tasks[a].delay(backend.now_ms() + 60_000)
    tasks[b].move_to_waiting_children()
    assert check(backend, a)["public_state"] == "delayed"
    assert check(backend, b)["public_state"] == "waiting_children"
    assert worker.in_flight == {}


# ------------------------------------------------------------------ ff_promote_delayed
def test_promotion_waits_until_the_delay_is_due(backend):
    until = backend.now_ms() + 60_000
    eid = create(backend, delay_until=until)
    assert promote(backend, eid, now_ms=until - 1).fields == ["not_yet_due"]
    assert check(backend, eid)["public_state"] == "delayed"
    assert promote(backend, eid, now_ms=until).fields == ["promoted"]
    c = check(backend, eid)
    assert c["public_state"] == "waiting" and c["blocking_reason"] == "waiting_for_worker"
    assert c["attempt_state"] == "pending_first_attempt"
    assert c["last_transition_at"] == str(until)  # caller's now
    score = zscore(backend, ExecKeys(eid).lane(LANE).eligible, eid)
    assert score == int(c["created_at"]) - int(c["priority"]) * 1_000_000_000_000


def test_promotion_cleans_up_entries_that_are_not_delayed(backend):
    k_lane = ExecKeys(ExecutionId.mint(1)).lane(LANE)
    missing = ExecutionId.mint(1)
    backend.client.zadd(k_lane.delayed, {missing: 1})
    assert promote(backend, missing).fields == ["not_found_cleaned"]
    assert zscore(backend, k_lane.delayed, missing) is None

    waiting = create(backend)
    backend.client.zadd(ExecKeys(waiting).lane(LANE).delayed, {waiting: 1})
    assert promote(backend, waiting).fields == ["not_delayed_cleaned"]
    check(backend, waiting)

    active = create(backend)
    claim(backend, active)
    backend.client.zadd(ExecKeys(active).lane(LANE).delayed, {active: 1})
    assert promote(backend, active).fields == ["not_runnable_cleaned"]
    check(backend, active)


def test_promotion_rejects_a_non_numeric_now(backend):
    eid = create(backend, delay_until=backend.now_ms() + 60_000)
    call = F.promote_delayed(ExecKeys(eid), ExecKeys(eid).lane(LANE), now_ms=0)
    call.args[1] = "now"
    raises("invalid_input", lambda: backend.call(call))
    check(backend, eid)
