"""ff_replay_execution for executions outside a flow."""

from ffcore.execution.client import Client
from ffcore.ids import ExecutionId
from ffcore.keys import ExecKeys
from ffcore.policy import Policy

from .invariants import LANE, attempt, check, claim, complete, create, fail, history_events, raises, zscore


def test_replaying_a_completed_execution_makes_it_waiting_again(backend):
    eid = create(backend)
    complete(backend, eid, claim(backend, eid), b"first")
    assert Client(backend).replay(eid).fields == ["0"]
    c = check(backend, eid)
    assert c["lifecycle_phase"] == "runnable" and c["public_state"] == "waiting"
    assert c["attempt_state"] == "pending_replay_attempt" and c["pending_replay_attempt"] == "1"
    assert c["terminal_outcome"] == "none" and c["completed_at"] == "" and c["replay_count"] == "1"
    score = zscore(backend, ExecKeys(eid).lane(LANE).eligible, eid)
    assert score == int(c["created_at"]) - int(c["priority"]) * 1_000_000_000_000
    ev = history_events(backend, eid)[-1]
    assert ev["event"] == "replay_initiated" and ev["replay_type"] == "normal" and ev["replay_count"] == "1"


def test_the_claim_after_a_replay_is_a_replay_attempt(backend):
    eid = create(backend)
    complete(backend, eid, claim(backend, eid))
    Client(backend).replay(eid)
    f = claim(backend, eid)
    assert (f.attempt_index, f.lease_epoch) == (1, 2)
    a = attempt(backend, eid, 1)
    assert a["attempt_type"] == "replay" and a["attempt_state"] == "started"
    assert attempt(backend, eid, 0)["attempt_state"] == "ended_success"
    complete(backend, eid, f, b"second")
    c = check(backend, eid)
    assert c["public_state"] == "completed" and c["total_attempt_count"] == "2"
    assert Client(backend).get_result(eid) == b"second"


def test_failed_and_cancelled_executions_can_be_replayed(backend):
    failed = create(backend)
    fail(backend, failed, claim(backend, failed), reason="x")
    cancelled = create(backend)
    Client(backend).cancel(cancelled, reason="y")
    for eid in (failed, cancelled):
        Client(backend).replay(eid)
        assert check(backend, eid)["public_state"] == "waiting"
    # a never-claimed execution replays into a first claim of type replay
    assert claim(backend, cancelled).attempt_index == 0
    assert attempt(backend, cancelled, 0)["attempt_type"] == "replay"
    check(backend, cancelled)


def test_replaying_a_non_terminal_execution_is_refused(backend):
    eid = create(backend)
    raises("execution_not_terminal", lambda: Client(backend).replay(eid))
    check(backend, eid)
    claim(backend, eid)
    raises("execution_not_terminal", lambda: Client(backend).replay(eid))
    check(backend, eid)


def test_replays_stop_at_the_policy_limit(backend):
    eid = create(backend, policy=Policy(max_replay_count=1))
    complete(backend, eid, claim(backend, eid))
    Client(backend).replay(eid)
    complete(backend, eid, claim(backend, eid))
    raises("max_replays_exhausted", lambda: Client(backend).replay(eid))
    c = check(backend, eid)
    assert c["public_state"] == "completed" and c["replay_count"] == "1"


def test_replaying_a_missing_execution_is_refused(backend):
    raises("execution_not_found", lambda: Client(backend).replay(ExecutionId.mint(12)))
