"""Per-execution spend (#24 item 5: ff_record_spend / ff_release_budget) and the budget reconciler
(#24 item 12: breached_at, release of failed and cancelled executions' spend)."""

from __future__ import annotations

import pytest

from ffcore import functions as F
from ffcore.budgets import spend
from ffcore.budgets.budgets import budget_keys, create_budget, list_budget_ids, report_usage
from ffcore.engine.budget_scanners import BudgetReconciler
from ffcore.errors import BudgetNotFound, InvalidId, InvalidInput
from ffcore.execution.client import Client
from ffcore.ids import new_uuid
from ffcore.reads import decode_map, text

from .budgetkit import attached, usage, worker
from .invariants import claim, complete, create, fail


def _ledger(backend, bid, eid):
    return {text(k): int(v) for k, v in backend.client.hgetall(budget_keys(backend, bid).by_exec(eid)).items()}


def _index(backend, bid):
    return {text(e) for e in backend.client.smembers(budget_keys(backend, bid).by_exec_index)}


def test_spend_adds_to_usage_and_to_the_executions_ledger(backend):
    bid, _ = create_budget(backend, hard={"usd": 100, "tokens": 0}, soft={"usd": 50})
    a, b = create(backend), create(backend)
    assert spend.record_spend(backend, bid, a, {"usd": 30, "tokens": 7}).status == "ok"
    r = spend.record_spend(backend, bid, b, {"usd": 25})
    assert (r.status, r.dimension, r.current, r.limit) == ("soft_breach", "usd", 55, 50)  # applied
    assert usage(backend, bid) == {"usd": 55, "tokens": 7}
    assert _ledger(backend, bid, a) == {"usd": 30, "tokens": 7} and _ledger(backend, bid, b) == {"usd": 25}
    assert _index(backend, bid) == {a, b}
    assert [(x.budget_id, x.spend) for x in spend.spend_of_execution(backend, a)] == [(bid, {"tokens": 7, "usd": 30})]
    count, rows = spend.ledgers_of_budget(backend, bid)
    assert count == 2 and [x.execution_id for x in rows] == [a, b]  # largest total first


def test_a_hard_breach_applies_nothing_and_an_idempotency_key_applies_once(backend):
    bid, _ = create_budget(backend, hard={"usd": 100})
    eid = create(backend)
    assert spend.record_spend(backend, bid, eid, {"usd": 60}, "k1").status == "ok"
    assert spend.record_spend(backend, bid, eid, {"usd": 60}, "k1").status == "already_applied"
    r = spend.record_spend(backend, bid, eid, {"usd": 41}, "k2")
    assert (r.status, r.current, r.limit) == ("hard_breach", 60, 100)
    assert usage(backend, bid) == {"usd": 60} and _ledger(backend, bid, eid) == {"usd": 60}
    d = decode_map(backend.client.hgetall(budget_keys(backend, bid).definition))
    assert d["breach_count"] == "1" and d["last_breach_dim"] == "usd"
    assert spend.record_spend(backend, bid, eid, {"usd": 40}, "k2").status == "ok"  # the breach did not stamp k2


def test_release_gives_the_ledger_back_never_below_zero_and_is_a_noop_twice(backend):
    bid, _ = create_budget(backend, hard={"usd": 0, "calls": 0})
    a, b = create(backend), create(backend)
    spend.record_spend(backend, bid, a, {"usd": 30, "calls": 2})
    spend.record_spend(backend, bid, b, {"usd": 5})
    backend.call(F.reset_budget(budget_keys(backend, bid), now_ms=1))  # usage 0: the release must floor at 0
    spend.record_spend(backend, bid, b, {"usd": 10})
    spend.record_spend(backend, bid, a, {"usd": 50})
    assert usage(backend, bid) == {"usd": 60, "calls": 0}
    assert spend.release_budget(backend, bid, b) is True  # its ledger is 15
    assert usage(backend, bid) == {"usd": 45, "calls": 0}
    assert _ledger(backend, bid, b) == {} and _index(backend, bid) == {a}
    assert spend.release_budget(backend, bid, b) is False  # no ledger: no-op
    assert spend.release_budget(backend, bid, a) is True  # ledger 80 usd, 2 calls: floors at 0
    assert usage(backend, bid) == {"usd": 0, "calls": 0} and _index(backend, bid) == set()


@pytest.mark.parametrize("deltas, message", [
    ({}, "at least one"),
    ({"usd": -1}, "deltas.usd"),
    ({"usd": 2**53}, "deltas.usd"),
    ({"usd": "3"}, "deltas.usd"),
    ({"breached_at": 1}, "reserved"),
    ({"": 1}, "dimension name"),
])
def test_bad_spend_is_refused_naming_the_field_and_applies_nothing(backend, deltas, message):
    bid, _ = create_budget(backend, hard={"usd": 100})
    eid = create(backend)
    with pytest.raises(InvalidInput, match=message):
        spend.record_spend(backend, bid, eid, {"tokens": 1, **deltas} if deltas else {})
    assert usage(backend, bid) == {} and _index(backend, bid) == set()


def test_spend_on_a_dimension_the_budget_does_not_define_is_refused_and_applies_nothing(backend):
    bid, _ = create_budget(backend, hard={"usd": 100}, soft={"tokens": 10})
    eid = create(backend)
    with pytest.raises(InvalidInput) as e:
        spend.record_spend(backend, bid, eid, {"usd": 5, "bogus_dim": 5})
    assert "deltas.bogus_dim" in e.value.details[0] and "tokens, usd" in e.value.details[0]
    assert usage(backend, bid) == {} and _ledger(backend, bid, eid) == {}
    # Every door gets it: a worker's task.record_spend goes through the same ffcore operation.
    assert spend.record_spend(backend, bid, eid, {"tokens": 3}).status == "ok"


def test_spend_on_an_unknown_budget_or_execution_id_is_refused(backend):
    eid = create(backend)
    ghost = new_uuid()
    with pytest.raises(BudgetNotFound):
        spend.record_spend(backend, ghost, eid, {"usd": 1})
    assert not backend.client.exists(budget_keys(backend, ghost).usage)
    assert not backend.client.exists(budget_keys(backend, ghost).by_exec(eid))
    bid, _ = create_budget(backend, hard={"usd": 100})
    with pytest.raises(InvalidId):
        spend.record_spend(backend, bid, "not-an-id", {"usd": 1})
    assert usage(backend, bid) == {}


def test_the_reconciler_releases_failed_and_cancelled_spend_and_keeps_successful_spend(backend):
    bid, _ = create_budget(backend, hard={"usd": 1000})
    ok, failed, cancelled, running = create(backend), create(backend), create(backend), create(backend)
    for eid, x in ((ok, 1), (failed, 10), (cancelled, 100), (running, 500)):
        spend.record_spend(backend, bid, eid, {"usd": x})
    complete(backend, ok, claim(backend, ok))
    fail(backend, failed, claim(backend, failed))  # default policy: no retries
    Client(backend).cancel(cancelled, reason="stop")
    claim(backend, running)
    assert BudgetReconciler(backend).tick() == 2
    assert usage(backend, bid) == {"usd": 501}
    assert _index(backend, bid) == {ok, running}
    assert BudgetReconciler(backend).tick() == 0  # nothing left to do


def test_a_scheduled_retry_keeps_the_spend(backend):
    bid, _ = create_budget(backend, hard={"usd": 1000})
    eid = create(backend)
    spend.record_spend(backend, bid, eid, {"usd": 10})
    retry = '{"max_retries":2,"backoff":{"type":"fixed","delay_ms":60000}}'
    assert fail(backend, eid, claim(backend, eid), retry_policy_json=retry)[0] == "retry_scheduled"
    BudgetReconciler(backend).tick()
    assert usage(backend, bid) == {"usd": 10}


def test_the_reconciler_sets_and_clears_breached_at_on_lifetime_budgets_only(backend):
    life, _ = create_budget(backend, hard={"usd": 100})
    recurring, _ = create_budget(backend, hard={"usd": 100}, reset_interval_ms=3_600_000)
    a = create(backend)
    spend.record_spend(backend, life, a, {"usd": 100})  # usage == hard: breached (the scheduler's rule)
    report_usage(backend, recurring, {"usd": 100})
    r = BudgetReconciler(backend)
    assert r.run(1_000) == 1
    lu = decode_map(backend.client.hgetall(budget_keys(backend, life).usage))
    assert lu["breached_at"] == "1000"
    assert "breached_at" not in decode_map(backend.client.hgetall(budget_keys(backend, recurring).usage))
    assert r.run(2_000) == 0  # still breached: the first time is kept
    assert decode_map(backend.client.hgetall(budget_keys(backend, life).usage))["breached_at"] == "1000"
    Client(backend).cancel(a, reason="refund")  # its spend is released, usage drops below the limit
    assert r.run(3_000) == 2  # released, then cleared in the same tick
    assert decode_map(backend.client.hgetall(budget_keys(backend, life).usage)) == {"usd": "0"}


def test_the_reconciler_prunes_budget_ids_without_a_definition(backend):
    bid, _ = create_budget(backend, hard={"usd": 1})
    stray = new_uuid()
    backend.client.sadd(budget_keys(backend, stray).policies_index, stray)
    BudgetReconciler(backend).tick()
    assert list_budget_ids(backend) == [bid]


def test_a_task_records_spend_and_gives_it_back_when_it_fails_terminally(backend):
    bid, _ = create_budget(backend, hard={"usd": 1000})
    (eid,) = attached(backend)
    (task,) = worker(backend).claim_next(1)
    assert task.record_spend(bid, {"usd": 12}, f"{eid}:call-1").status == "ok"
    assert task.record_spend(bid, {"usd": 12}, f"{eid}:call-1").status == "already_applied"
    assert usage(backend, bid) == {"usd": 12}
    assert task.fail("boom").retry_scheduled is False
    assert usage(backend, bid) == {"usd": 0} and _ledger(backend, bid, eid) == {}  # at once, no scanner


def test_a_task_that_completes_keeps_its_spend(backend):
    bid, _ = create_budget(backend, hard={"usd": 1000})
    attached(backend)
    (task,) = worker(backend).claim_next(1)
    task.record_spend(bid, {"usd": 3})
    task.complete()
    assert usage(backend, bid) == {"usd": 3}

