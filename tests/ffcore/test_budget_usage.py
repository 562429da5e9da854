"""Budgets: creation, usage reports (soft vs hard breach, all-or-nothing, dedup) and the status read."""

from __future__ import annotations

import pytest

from ffcore import functions as F
from ffcore.budgets import budgets
from ffcore.budgets.budgets import budget_keys, create_budget, get_budget, parse_usage_reply, report_usage
from ffcore.errors import InvalidInput, ScriptError
from ffcore.reads import decode_map

from .budgetkit import attached, usage, worker


def test_creating_a_budget_stores_limits_and_schedules_its_reset(backend):
    bid, created = create_budget(backend, hard={"tokens": 100, "calls": 10}, soft={"tokens": 80},
                                 reset_interval_ms=60_000, now_ms=1_000)
    assert created
    b = budget_keys(backend, bid)
    d = decode_map(backend.client.hgetall(b.definition))
    assert d["next_reset_at"] == "61000" and d["breach_count"] == "0" and d["enforcement_mode"] == "strict"
    assert decode_map(backend.client.hgetall(b.limits)) == {"hard:tokens": "100", "soft:tokens": "80",
                                                            "hard:calls": "10", "soft:calls": "0"}
    assert backend.client.zscore(b.resets_index, bid) == 61_000
    assert create_budget(backend, budget_id=bid, hard={"tokens": 5}) == (bid, False)  # unchanged
    assert decode_map(backend.client.hgetall(b.limits))["hard:tokens"] == "100"


@pytest.mark.parametrize("kw, message", [
    ({"hard": {}}, "at least one dimension"),
    ({"hard": {"tokens": 10}, "soft": {"tokens": 20}}, "above its hard limit"),
    ({"hard": {"tokens": -1}}, "non-negative"),
    ({"hard": {"": 1}}, "dimension name"),
    ({"hard": {"tokens": 1}, "reset_interval_ms": -5}, "reset_interval_ms"),
])
def test_a_bad_budget_is_refused_before_anything_is_written(backend, kw, message):
    with pytest.raises(InvalidInput, match=message):
        create_budget(backend, **kw)
    assert budgets.list_budget_ids(backend) == []


def test_usage_under_the_soft_limit_applies_and_replies_ok(backend):
    bid, _ = create_budget(backend, hard={"tokens": 100}, soft={"tokens": 80})
    r = report_usage(backend, bid, {"tokens": 30})
    assert (r.status, r.applied) == ("ok", True)
    assert usage(backend, bid) == {"tokens": 30}


def test_crossing_the_soft_limit_applies_and_reports_a_soft_breach(backend):
    bid, _ = create_budget(backend, hard={"tokens": 100}, soft={"tokens": 80})
    report_usage(backend, bid, {"tokens": 70})
    r = report_usage(backend, bid, {"tokens": 15})
    assert (r.status, r.dimension, r.current, r.limit) == ("soft_breach", "tokens", 85, 80)
    assert usage(backend, bid) == {"tokens": 85}
    st = get_budget(backend, bid)
    assert st is not None and st["soft_breach_count"] == "1" and st["breach_count"] == "0"
    assert [(d.name, d.state) for d in st.dimensions] == [("tokens", "soft")]


def test_a_hard_breach_applies_nothing_to_any_dimension(backend):
    bid, _ = create_budget(backend, hard={"tokens": 100, "calls": 5})
    report_usage(backend, bid, {"tokens": 90, "calls": 1})
    r = report_usage(backend, bid, {"calls": 1, "tokens": 20})
    assert (r.status, r.dimension, r.current, r.limit, r.applied) == ("hard_breach", "tokens", 90, 100, False)
    assert usage(backend, bid) == {"tokens": 90, "calls": 1}  # calls (fine on its own) not applied either
    st = get_budget(backend, bid)
    assert st is not None and st["breach_count"] == "1" and st["last_breach_dim"] == "tokens"
    assert st.breached == []  # 90 of 100: the scheduler still admits


def test_reaching_the_hard_limit_exactly_is_allowed_and_then_blocks_the_scheduler(backend):
    bid, _ = create_budget(backend, hard={"tokens": 100})
    assert report_usage(backend, bid, {"tokens": 100}).status == "ok"
    st = get_budget(backend, bid)
    assert st is not None and [d.name for d in st.breached] == ["tokens"] and st.state == "hard"


def test_a_retried_report_with_the_same_dedup_key_applies_once(backend):
    bid, _ = create_budget(backend, hard={"tokens": 1000})
    (eid,) = attached(backend)
    (task,) = worker(backend).claim_next(1)
    assert task.report_usage(bid, {"tokens": 10}, "step-1").status == "ok"
    assert task.report_usage(bid, {"tokens": 10}, "step-1").status == "already_applied"
    assert task.report_usage(bid, {"tokens": 5}, "step-2").status == "ok"
    assert usage(backend, bid) == {"tokens": 15}
    task.complete()


def test_a_hard_breach_does_not_use_up_the_dedup_key(backend):
    bid, _ = create_budget(backend, hard={"tokens": 10})
    assert report_usage(backend, bid, {"tokens": 11}, "k1").hard_breach
    budgets.reset_budget(backend, bid)
    assert report_usage(backend, bid, {"tokens": 5}, "k1").status == "ok"  # not ALREADY_APPLIED
    assert usage(backend, bid) == {"tokens": 5}


def test_a_task_can_raise_on_a_hard_breach(backend):
    from ffcore.worker.task_ops import BudgetExceeded

    bid, _ = create_budget(backend, hard={"tokens": 10})
    attached(backend)
    (task,) = worker(backend).claim_next(1)
    with pytest.raises(BudgetExceeded, match="tokens would exceed its hard limit"):
        task.report_usage(bid, {"tokens": 11}, raise_on_hard_breach=True)
    assert usage(backend, bid) == {}
    task.fail("budget_exceeded")


def test_negative_or_non_integer_deltas_are_refused(backend):
    bid, _ = create_budget(backend, hard={"tokens": 10})
    for bad in ({"tokens": -1}, {"tokens": 1.5}, {"tokens": True}, {}):
        with pytest.raises(InvalidInput):
            report_usage(backend, bid, bad)  # type: ignore[arg-type]
    assert usage(backend, bid) == {}


def test_a_breach_reply_without_numbers_is_rejected():
    with pytest.raises(ScriptError, match="unexpected_reply"):
        parse_usage_reply(F.Reply("HARD_BREACH", ["tokens", "", "10"]))
    assert parse_usage_reply(F.Reply("SOFT_BREACH", ["t", "9", "8"])).current == 9


def test_the_burn_rate_and_projected_hard_limit_come_from_usage_samples(backend):
    bid, _ = create_budget(backend, hard={"tokens": 1000})
    b = budget_keys(backend, bid)
    from ffcore import keys

    now = backend.now_ms()
    # 100 tokens at t-10min, 400 now: 30 tokens/min, 600 left -> 20 minutes to the hard limit.
    backend.client.xadd(keys.budget_samples(b), {"tokens": "100"}, id=f"{now - 600_000}-0")
    report_usage(backend, bid, {"tokens": 400})
    st = get_budget(backend, bid, now_ms=now)
    assert st is not None
    (d,) = st.dimensions
    assert d.burn_per_min == pytest.approx(30, rel=0.01)
    assert d.hard_at is not None and abs(d.hard_at - (now + 20 * 60_000)) < 2000


def test_the_sampler_records_usage_only_when_it_changed(backend):
    bid, _ = create_budget(backend, hard={"tokens": 1000})
    report_usage(backend, bid, {"tokens": 1})
    assert budgets.sample_usage(backend, [bid]) == 1
    assert budgets.sample_usage(backend, [bid]) == 0
    report_usage(backend, bid, {"tokens": 1})
    assert budgets.sample_usage(backend, [bid]) == 1
