"""The scheduler and budgets: exhausted budgets block attached executions (never spinning), resets and
unblock reconcilers bring them back."""

from __future__ import annotations

from ffcore import keys
from ffcore.budgets.admission import attachments, blocker
from ffcore.budgets.budgets import budget_keys, create_budget, get_budget, report_usage
from ffcore.engine.budget_scanners import AdmissionUnblockScanner, BudgetResetScanner, BudgetSampler
from ffcore.keys import ExecKeys
from ffcore.reads import decode_map, text

from .budgetkit import attached, blocking, public_state, usage, worker
from .invariants import check, core


def exhausted(backend, **kw):
    bid, _ = create_budget(backend, hard={"tokens": 100}, **kw)
    report_usage(backend, bid, {"tokens": 100})
    return bid


def test_an_execution_gets_its_budget_and_quota_attachment_from_policy_and_core(backend):
    bid, _ = create_budget(backend, hard={"tokens": 1})
    (eid,) = attached(backend, budgets=(bid,))
    c = core(backend, eid)
    assert c["budget_ids"] == bid  # the field upstream's scheduler reads
    assert attachments(c, {}).budget_ids == (bid,)
    assert attachments({"budget_ids": f'["{bid}"]'}, {}).budget_ids == (bid,)  # JSON list form


def test_the_scheduler_blocks_an_execution_whose_budget_is_exhausted(backend):
    bid = exhausted(backend)
    (eid,) = attached(backend, budgets=(bid,))
    w = worker(backend)
    assert w.claim_next(1) == []
    c = check(backend, eid)
    assert (c["eligibility_state"], c["public_state"]) == ("blocked_by_budget", "rate_limited")
    reason, detail = blocking(backend, eid)
    assert reason == "waiting_for_budget" and detail.startswith(f"budget {bid}: tokens at its hard limit (100/100)")
    assert blocker(c) == ("budget", bid)
    assert backend.client.zscore(keys.budget_blocked(budget_keys(backend, bid)), eid) is not None
    # Not spinning: the blocked execution left the eligible set, so the next poll finds nothing to do.
    assert backend.client.zcard(ExecKeys(eid).lane("default").eligible) == 0
    assert w.claim_next(1) == []


def test_unattached_work_behind_a_blocked_execution_still_runs(backend):
    bid = exhausted(backend)
    (held,) = attached(backend, budgets=(bid,))
    (free,) = attached(backend)
    tasks = worker(backend).claim_next(2)
    assert [t.execution_id for t in tasks] == [free]
    assert public_state(backend, held) == "rate_limited"


def test_a_budget_with_room_admits(backend):
    bid, _ = create_budget(backend, hard={"tokens": 100})
    report_usage(backend, bid, {"tokens": 99})
    attached(backend, budgets=(bid,))
    (t,) = worker(backend).claim_next(1)
    t.complete()


def test_the_unblock_scanner_keeps_it_blocked_while_the_budget_is_exhausted_and_frees_it_after_a_reset(backend):
    bid = exhausted(backend)
    (eid,) = attached(backend, budgets=(bid,))
    worker(backend).claim_next(1)
    scanner = AdmissionUnblockScanner(backend)
    assert scanner.tick() == 0
    assert public_state(backend, eid) == "rate_limited"
    from ffcore.budgets.budgets import reset_budget

    reset_budget(backend, bid)  # an operator reset, without the reverse-index shortcut
    assert scanner.tick() == 1
    assert public_state(backend, eid) == "waiting"
    assert backend.client.zcard(keys.budget_blocked(budget_keys(backend, bid))) == 0
    (t,) = worker(backend).claim_next(1)
    assert t.execution_id == eid


def test_a_reset_on_schedule_unblocks_blocked_executions(backend):
    now = backend.now_ms()
    # Created "an interval ago", so the first reset is due now.
    bid = exhausted(backend, reset_interval_ms=60_000, now_ms=now - 60_000)
    eids = attached(backend, 2, budgets=(bid,))
    assert worker(backend).claim_next(2) == []
    assert {public_state(backend, e) for e in eids} == {"rate_limited"}
    assert BudgetResetScanner(backend).tick() == 1
    assert usage(backend, bid) == {"tokens": 0}
    d = decode_map(backend.client.hgetall(budget_keys(backend, bid).definition))
    assert d["reset_count"] == "1" and int(d["next_reset_at"]) >= now + 60_000
    assert {public_state(backend, e) for e in eids} == {"waiting"}  # no separate unblock pass needed
    assert len(worker(backend).claim_next(2)) == 2
    assert BudgetResetScanner(backend).tick() == 0  # rescheduled, not due again


def test_one_exhausted_budget_among_several_is_enough_to_block(backend):
    ok, _ = create_budget(backend, hard={"tokens": 100})
    bad = exhausted(backend)
    (eid,) = attached(backend, budgets=(ok, bad))
    worker(backend).claim_next(1)
    assert blocker(core(backend, eid)) == ("budget", bad)


def test_an_unknown_budget_does_not_strand_work(backend):
    (eid,) = attached(backend, budgets=("00000000-0000-4000-8000-000000000001",))
    (t,) = worker(backend).claim_next(1)
    assert t.execution_id == eid


def test_budget_status_lists_the_executions_blocked_on_it(backend):
    bid = exhausted(backend)
    eids = attached(backend, 3, budgets=(bid,))
    worker(backend).claim_next(3)
    st = get_budget(backend, bid)
    assert st is not None and st.blocked_count == 3 and {e for e, _ in st.blocked} == set(eids)


def test_the_sampler_prunes_executions_no_longer_blocked_from_the_budget_index(backend):
    from ffcore.execution.client import Client

    bid = exhausted(backend)
    (eid,) = attached(backend, budgets=(bid,))
    worker(backend).claim_next(1)
    Client(backend).cancel(eid, reason="not needed")
    BudgetSampler(backend).tick()
    assert [text(x) for x in backend.client.zrange(keys.budget_blocked(budget_keys(backend, bid)), 0, -1)] == []


def test_api_policies_carry_budget_and_quota_ids_and_refuse_malformed_ones():
    import pytest

    from ffcore.errors import InvalidInput
    from ffcore.policy import policy_from_mapping

    bid, qid = "00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-000000000002"
    p = policy_from_mapping({"budget_ids": [bid], "quota_policy_id": qid})
    assert p.as_json() == {"budget_ids": [bid], "quota_policy_id": qid}
    for bad in ({"budget_ids": ["nope"]}, {"quota_policy_id": 7}):
        with pytest.raises(InvalidInput):
            policy_from_mapping(bad)
