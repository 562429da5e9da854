"""ClaimedTask terminal calls whose effect was already applied (a retried call after a lost reply)."""

import pytest
import redis

from ffcore import functions as F
from ffcore.execution.client import Client
from ffcore.policy import Backoff, Policy, RetryPolicy
from ffcore.worker.task import TaskConsumed
from ffcore.worker.worker import Registry, Worker, WorkerConfig

from .invariants import check, raises


def _task(backend, **create_kw):
    Client(backend).create(kind="job", **create_kw)
    (task,) = Worker(backend, WorkerConfig(worker_instance_id="w-rc"), Registry()).claim_next(1)
    check(backend, task.execution_id)
    return task


def test_a_complete_that_was_already_applied_succeeds(backend):
    task = _task(backend)
    backend.call(F.complete_execution(task.keys, task.fence, b"first"))
    check(backend, task.execution_id)
    task.complete("first")  # execution_not_active(success, our epoch) + our attempt ended_success
    assert task.consumed and not task.lease_lost.is_set()
    assert check(backend, task.execution_id)["public_state"] == "completed"
    assert Client(backend).get_result(task.execution_id) == b"first"


def test_a_fail_after_a_real_complete_raises(backend):
    task = _task(backend)
    backend.call(F.complete_execution(task.keys, task.fence, b""))
    err = raises("execution_not_active", lambda: task.fail("boom"))
    assert err.details == ["success", "1"]
    assert task.lease_lost.is_set()
    assert check(backend, task.execution_id)["public_state"] == "completed"


def test_a_complete_after_a_real_fail_raises(backend):
    task = _task(backend)
    backend.call(F.fail_execution(task.keys, task.fence, reason="x"))
    raises("execution_not_active", lambda: task.complete("r"))
    assert check(backend, task.execution_id)["public_state"] == "failed"


def test_a_terminal_fail_that_was_already_applied_succeeds(backend):
    task = _task(backend)
    backend.call(F.fail_execution(task.keys, task.fence, reason="x"))
    assert task.fail("x").retry_scheduled is False
    assert check(backend, task.execution_id)["public_state"] == "failed"


def test_a_retrying_fail_that_was_already_applied_reports_the_retry(backend):
    task = _task(backend, policy=Policy(retry=RetryPolicy(max_retries=2, backoff=Backoff(kind="fixed",
                                                                                         delay_ms=60_000))))
    reply = backend.call(F.fail_execution(task.keys, task.fence, reason="x",
                                          retry_policy_json='{"max_retries":2,"backoff":{"type":"fixed",'
                                                            '"delay_ms":60000}}'))
    out = task.fail("x")
    assert out.retry_scheduled and out.delay_until == int(reply[1])
    assert check(backend, task.execution_id)["public_state"] == "delayed"


def test_a_cancel_that_was_already_applied_succeeds(backend):
    task = _task(backend)
    refs = F.CoreRefs.from_core(check(backend, task.execution_id))
    backend.call(F.cancel_execution(task.keys, refs, reason="r", source="worker", lease_id=task.lease_id,
                                    lease_epoch=str(task.lease_epoch)))
    task.cancel("r")
    assert check(backend, task.execution_id)["public_state"] == "cancelled"


def test_a_complete_does_not_reconcile_against_an_operator_cancel(backend):
    task = _task(backend)
    Client(backend).cancel(task.execution_id, reason="operator")
    assert raises("execution_not_active", lambda: task.complete("r")).details == ["cancelled", "1"]
    assert check(backend, task.execution_id)["public_state"] == "cancelled"


def test_a_lost_reply_is_reconciled_against_the_attempt_record(backend, monkeypatch):
    task = _task(backend)
    real_call = backend.call

    def applied_then_dropped(call):
        real_call(call)
        raise redis.ConnectionError("connection reset after send")

    monkeypatch.setattr(backend, "call", applied_then_dropped)
    task.complete("done")  # no error: the attempt shows ended_success at our epoch
    monkeypatch.undo()
    assert check(backend, task.execution_id)["public_state"] == "completed"


def test_a_lost_reply_of_an_unapplied_call_is_sent_again(backend, monkeypatch):
    task = _task(backend)
    real_call = backend.call
    calls = []

    def dropped_once(call):
        calls.append(call.function)
        if len(calls) == 1:
            raise redis.ConnectionError("connection refused")
        return real_call(call)

    monkeypatch.setattr(backend, "call", dropped_once)
    task.complete("done")
    monkeypatch.undo()
    assert calls == ["ff_complete_execution", "ff_complete_execution"]
    assert check(backend, task.execution_id)["public_state"] == "completed"


def test_a_task_accepts_only_one_terminal_call(backend):
    task = _task(backend)
    task.complete("x")
    with pytest.raises(TaskConsumed):
        task.fail("again")
    assert check(backend, task.execution_id)["public_state"] == "completed"


def test_a_delay_that_was_already_applied_succeeds(backend):
    task = _task(backend)
    until = backend.now_ms() + 60_000
    backend.call(F.delay_execution(task.keys, task.fence, delay_until=until))
    task.delay(until)
    assert check(backend, task.execution_id)["public_state"] == "delayed"


def test_a_delay_after_an_operator_cancel_raises(backend):
    task = _task(backend)
    Client(backend).cancel(task.execution_id, reason="stop")
    raises("execution_not_active", lambda: task.delay(backend.now_ms() + 1000))
    assert check(backend, task.execution_id)["public_state"] == "cancelled"
