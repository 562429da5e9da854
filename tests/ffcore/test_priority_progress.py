"""ff_change_priority and ff_update_progress."""

import dataclasses
import time

import pytest

from ffcore import functions as F
from ffcore.execution.client import Client
from ffcore.ids import ExecutionId, new_uuid
from ffcore.keys import ExecKeys
from ffcore.worker.worker import Registry, Worker, WorkerConfig

from .invariants import LANE, check, claim, complete, core, create, raises, zscore


# ------------------------------------------------------------------ priority
def test_changing_priority_rescores_the_eligible_entry(backend):
    eid = create(backend, priority=1)
    assert Client(backend).change_priority(eid, 40).fields == ["1", "40"]
    c = check(backend, eid)
    assert c["priority"] == "40"
    assert zscore(backend, ExecKeys(eid).lane(LANE).eligible, eid) == int(c["created_at"]) - 40 * 1_000_000_000_000


def test_a_raised_priority_jumps_the_queue(backend):
    client = Client(backend)
    first = client.create(kind="job").execution_id
    second = client.create(kind="job").execution_id
    client.change_priority(second, 5)
    (task,) = Worker(backend, WorkerConfig(worker_instance_id="w-pr"), Registry()).claim_next(1)
    assert task.execution_id == second
    check(backend, first)
    check(backend, second)


def test_a_changed_priority_is_clamped(backend):
    eid = create(backend, priority=3)
    assert Client(backend).change_priority(eid, 12_345).fields == ["3", "9000"]
    assert Client(backend).change_priority(eid, -1).fields == ["9000", "0"]
    check(backend, eid)


def test_priority_can_only_change_while_waiting(backend):
    delayed = create(backend, delay_until=backend.now_ms() + 60_000)
    raises("execution_not_eligible", lambda: Client(backend).change_priority(delayed, 2))
    check(backend, delayed)
    active = create(backend)
    claim(backend, active)
    raises("execution_not_eligible", lambda: Client(backend).change_priority(active, 2))
    assert check(backend, active)["priority"] == "0"
    raises("execution_not_found", lambda: Client(backend).change_priority(ExecutionId.mint(4), 2))


def test_a_non_numeric_priority_is_refused(backend):
    eid = create(backend)
    raises("invalid_input", lambda: backend.call(F.change_priority(ExecKeys(eid), lane=LANE, priority="top")))
    check(backend, eid)


# ------------------------------------------------------------------ progress
def _progress(backend, eid, f, pct="", message=""):
    return backend.call(F.update_progress(ExecKeys(eid), f, pct=pct, message=message))


def test_progress_is_recorded_on_the_core(backend):
    eid = create(backend)
    f = claim(backend, eid)
    before = backend.now_ms()
    assert _progress(backend, eid, f, "40", "halfway-ish").status == "OK"
    c = check(backend, eid)
    assert (c["progress_pct"], c["progress_message"]) == ("40", "halfway-ish")
    assert int(c["progress_updated_at"]) >= before
    _progress(backend, eid, f, "", "only the message")
    c = check(backend, eid)
    assert (c["progress_pct"], c["progress_message"]) == ("40", "only the message")


def test_progress_checks_lease_id_and_epoch_but_not_the_attempt_id(backend):
    eid = create(backend)
    f = claim(backend, eid)
    raises("stale_lease", lambda: _progress(backend, eid, dataclasses.replace(f, lease_id=new_uuid()), "1"))
    raises("stale_lease", lambda: _progress(backend, eid, dataclasses.replace(f, lease_epoch=9), "1"))
    assert core(backend, eid)["progress_pct"] == ""
    _progress(backend, eid, dataclasses.replace(f, attempt_id=new_uuid()), "2")
    assert check(backend, eid)["progress_pct"] == "2"


def test_progress_of_an_expired_lease_is_refused_without_marking(backend):
    eid = create(backend)
    f = claim(backend, eid, ttl_ms=150)
    time.sleep(0.2)
    raises("lease_expired", lambda: _progress(backend, eid, f, "5"))
    assert check(backend, eid)["ownership_state"] == "leased"


def test_progress_after_revoke_or_completion_is_refused(backend):
    eid = create(backend)
    f = claim(backend, eid)
    Client(backend).revoke_lease(eid)
    raises("lease_revoked", lambda: _progress(backend, eid, f, "5"))
    check(backend, eid)
    done = create(backend)
    g = claim(backend, done)
    complete(backend, done, g)
    assert raises("execution_not_active", lambda: _progress(backend, done, g, "5")).details == ["success", "1"]
    raises("execution_not_found", lambda: _progress(backend, ExecutionId.mint(3), g, "5"))


def test_the_task_validates_and_reports_progress(backend):
    create(backend)
    (task,) = Worker(backend, WorkerConfig(worker_instance_id="w-pg"), Registry()).claim_next(1)
    with pytest.raises(ValueError):
        task.update_progress(101)
    task.update_progress(75, "nearly")
    c = check(backend, task.execution_id)
    assert (c["progress_pct"], c["progress_message"]) == ("75", "nearly")
