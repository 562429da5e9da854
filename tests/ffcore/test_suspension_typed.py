"""Typed suspend (#24 item 2, operations §6.2): any of several names, N of M, AllOf / AtLeast over several
waitpoints, the suspend idempotency key, the requester, and bad input refused with the field named."""

from __future__ import annotations

import pytest

from ffcore.errors import ERRORS
from ffcore.keys import ExecKeys
from ffcore.suspension.conditions import (
    AllOf,
    AtLeast,
    all_of,
    any_of,
    describe_json,
    n_of,
    operator_only,
    quorum,
    timeout_only,
    wait_on,
)
from ffcore.suspension.signals import APPENDED, NO_OP, RESUMED, Signals
from tests.ffcore.suspension_support import check, claim_again, claimed, core, signal, waitpoint
from tests.ffcore.suspension_support import suspension as susp


def test_any_of_resumes_on_either_name_and_not_on_a_third(hb):
    for name in ("approve", "reject"):
        t = claimed(hb)
        out = t.suspend(any_of("approve", "reject"), reason_code="waiting_for_approval")
        assert signal(hb, t.execution_id, out.waitpoint_id, out.token, "escalate").effect == NO_OP
        assert check(hb, t.execution_id)["public_state"] == "suspended"
        got = signal(hb, t.execution_id, out.waitpoint_id, out.token, name)
        assert got.resumed, name
        assert check(hb, t.execution_id)["public_state"] == "waiting"
        [sig] = claim_again(hb, t.execution_id).resume_signals()
        assert sig.signal_name == name
        assert describe_json(susp(hb, t.execution_id)["resume_condition_json"]) == "any of approve, reject"


def test_two_of_three_approvers_resume_at_two_not_at_one(hb):
    t = claimed(hb)
    out = t.suspend(quorum(2, of=3, name="approve"))
    assert describe_json(susp(hb, t.execution_id)["resume_condition_json"]) == "2 of 3 approvers: approve"
    assert signal(hb, t.execution_id, out.waitpoint_id, out.token, "reject").effect == NO_OP
    assert signal(hb, t.execution_id, out.waitpoint_id, out.token, "approve", source_identity="ann").effect == APPENDED
    assert check(hb, t.execution_id)["public_state"] == "suspended"  # 1 of 3: not yet
    second = signal(hb, t.execution_id, out.waitpoint_id, out.token, "approve", source_identity="bob")
    assert second.resumed
    assert check(hb, t.execution_id)["public_state"] == "waiting"
    who = [s.source_identity for s in claim_again(hb, t.execution_id).resume_signals()]
    assert who == ["ann", "bob"]


def test_n_of_distinct_names(hb):
    t = claimed(hb)
    out = t.suspend(n_of(2, "legal", "finance", "ops"))
    assert signal(hb, t.execution_id, out.waitpoint_id, out.token, "ops").effect == APPENDED
    assert signal(hb, t.execution_id, out.waitpoint_id, out.token, "ops").effect == NO_OP  # its matcher is taken
    assert check(hb, t.execution_id)["public_state"] == "suspended"
    assert signal(hb, t.execution_id, out.waitpoint_id, out.token, "legal").resumed


def test_allof_composite_over_two_waitpoints(hb):
    t = claimed(hb)
    out = t.suspend(AllOf(wait_on("legal", "ok"), wait_on("finance", any_of("ok", "waive"))),
                    timeout_ms=60_000, requested_by="operator")
    assert [w.waitpoint_key for w in out.additional_waitpoints] == ["finance"]
    assert out.waitpoint_key == "legal" and out.token_for("finance") != out.token
    eid, legal, finance = t.execution_id, out.waitpoint_id, out.waitpoint_id_for("finance")
    s = susp(hb, eid)
    assert (s["requested_by"], s["composite"]) == ("operator", "1")
    assert describe_json(s["resume_condition_json"]) == "all of (ok on legal; any of ok, waive on finance)"

    with pytest.raises(ERRORS["invalid_token"]):  # each waitpoint has its own token
        signal(hb, eid, finance, out.token, "ok")
    assert signal(hb, eid, legal, out.token, "ok").effect == APPENDED
    assert signal(hb, eid, legal, out.token, "ok").effect == NO_OP  # legal's member is already satisfied
    assert check(hb, eid)["public_state"] == "suspended"
    assert signal(hb, eid, finance, out.token_for("finance"), "nope").effect == NO_OP
    got = signal(hb, eid, finance, out.token_for("finance"), "waive")
    assert got.resumed and got.effect == RESUMED
    c = check(hb, eid)
    assert (c["public_state"], c["current_waitpoint_id"]) == ("waiting", "")
    assert waitpoint(hb, eid, legal)["state"] == waitpoint(hb, eid, finance)["state"] == "closed"
    assert hb.client.zscore(ExecKeys(eid).idx.suspension_timeout, eid) is None
    names = [g.signal_name for g in claim_again(hb, eid).resume_signals()]
    assert names == ["ok", "waive"]
    with pytest.raises(ERRORS["target_not_signalable"]):
        signal(hb, eid, finance, out.token_for("finance"), "ok")


def test_at_least_two_of_three_waitpoints(hb):
    t = claimed(hb)
    out = t.suspend(AtLeast(2, wait_on("a"), wait_on("b"), wait_on("c")))
    eid = t.execution_id
    assert len(Signals(hb).pending_waitpoints(eid)) == 3
    first = signal(hb, eid, out.waitpoint_id_for("b"), out.token_for("b"), "anything", idempotency_key="once")
    assert first.effect == APPENDED
    dup = signal(hb, eid, out.waitpoint_id_for("b"), out.token_for("b"), "anything", idempotency_key="once")
    assert dup.duplicate and dup.signal_id == first.signal_id
    assert hb.client.zcard(ExecKeys(eid).signals) == 1
    assert check(hb, eid)["public_state"] == "suspended"
    assert signal(hb, eid, out.waitpoint_id_for("c"), out.token_for("c"), "x").resumed
    assert check(hb, eid)["public_state"] == "waiting"
    assert Signals(hb).pending_waitpoints(eid) == []  # all three closed, "a" included


def test_operator_resume_closes_every_waitpoint_of_a_composite(hb):
    t = claimed(hb)
    out = t.suspend(AllOf(wait_on("a", "x"), wait_on("b", "y")))
    assert Signals(hb).resume(t.execution_id) == "waiting"
    for w in (out.waitpoint_id, out.waitpoint_id_for("b")):
        assert waitpoint(hb, t.execution_id, w)["state"] == "closed"


def test_same_idempotency_key_same_waitpoint_no_second_suspension(hb):
    t = claimed(hb)
    first = t.suspend("go", idempotency_key="step-1", timeout_ms=60_000)
    assert not first.replayed and t.consumed
    assert signal(hb, t.execution_id, first.waitpoint_id, first.token, "go").resumed
    again = claim_again(hb, t.execution_id)
    epoch = core(hb, t.execution_id)["current_lease_epoch"]
    rep = again.suspend("go", idempotency_key="step-1", timeout_ms=60_000)
    assert rep.replayed and (rep.suspension_id, rep.waitpoint_id, rep.token) == (
        first.suspension_id, first.waitpoint_id, first.token)
    c = check(hb, t.execution_id)
    assert (c["public_state"], c["current_lease_epoch"]) == ("active", epoch)  # no second suspension
    assert not again.consumed
    other = again.suspend("go", idempotency_key="step-2")  # a new key suspends anew
    assert not other.replayed and other.waitpoint_id != first.waitpoint_id
    assert check(hb, t.execution_id)["public_state"] == "suspended"


def test_composite_with_key_replays_every_waitpoint(hb):
    t = claimed(hb)
    first = t.suspend(AllOf(wait_on("a"), wait_on("b")), idempotency_key="k")
    Signals(hb).resume(t.execution_id)
    rep = claim_again(hb, t.execution_id).suspend(AllOf(wait_on("a"), wait_on("b")), idempotency_key="k")
    assert rep.replayed and rep.additional_waitpoints == first.additional_waitpoints


def test_simple_forms_keep_working_through_the_contract_function(hb):
    t = claimed(hb)
    calls = []
    real = hb.call
    hb.call = lambda c, *a, **kw: (calls.append(c.function), real(c, *a, **kw))[1]
    try:
        out = t.suspend(["a", "b"])
    finally:
        hb.call = real
    assert calls == ["ff_suspend_execution"]
    assert describe_json(susp(hb, t.execution_id)["resume_condition_json"]) == "all of a, b"
    assert signal(hb, t.execution_id, out.waitpoint_id, out.token, "a").effect == APPENDED


@pytest.mark.parametrize(("make", "field"), [
    (lambda t: t.suspend(any_of()), "required_signal_names"),
    (lambda t: t.suspend(any_of("ok", "")), "any_of"),
    (lambda t: t.suspend(n_of(4, "a", "b", "c")), "minimum_signal_count"),
    (lambda t: t.suspend(n_of(0, "a")), "minimum_signal_count"),
    (lambda t: t.suspend(quorum(2, of=0, name="a")), "of"),
    (lambda t: t.suspend(all_of("a", 3)), "all_of"),
    (lambda t: t.suspend(AllOf()), "allof_empty_members"),
    (lambda t: t.suspend(AtLeast(3, wait_on("a"), wait_on("b"))), "count_exceeds_waitpoint_set"),
    (lambda t: t.suspend(AllOf(wait_on("a"), wait_on("a"))), "waitpoint_key"),
    (lambda t: t.suspend(AtLeast(1, *[wait_on(f"w{i}") for i in range(65)])), "at most 64 waitpoints"),
    (lambda t: t.suspend("x", requested_by="someone"), "requested_by"),
    (lambda t: t.suspend("x", idempotency_key=""), "idempotency_key"),
    (lambda t: t.suspend("x", timeout_ms=0), "timeout_ms"),
    (lambda t: t.suspend("x", timeout_behavior="explode"), "timeout_behavior"),
    (lambda t: t.suspend(42), "conditions"),
    (lambda t: t.suspend(timeout_only()), "timeout_only_without_deadline"),
    (lambda t: t.suspend("x", timeout_at=1), "timeout_at_in_past"),
])
def test_bad_input_names_the_field_and_changes_nothing(hb, make, field):
    t = claimed(hb)
    before = core(hb, t.execution_id)
    with pytest.raises(ValueError, match=field):
        make(t)
    assert core(hb, t.execution_id) == before and not t.consumed
    assert t.suspend("fine").waitpoint_id  # the task still holds its lease


def test_library_refuses_a_malformed_composite_before_writing(hb):
    from ffcore import functions as F
    t = claimed(hb)
    before = core(hb, t.execution_id)
    wid = "11111111-1111-4111-8111-111111111111"
    call = F.suspend_typed(t.keys, t.fence, suspension_id="s", waitpoints=[(wid, "a")],
                           condition_json='{"v":1,"composite":true,"tree":{"kind":"AllOf","members":[]}}',
                           policy_json="{}")
    with pytest.raises(ERRORS["invalid_input"], match="allof_empty_members"):
        hb.call(call)
    assert core(hb, t.execution_id) == before


def test_a_composite_that_times_out_or_is_cancelled_leaves_no_open_waitpoint(hb):
    from ffcore.engine.suspension_scanners import SuspensionTimeoutScanner
    from ffcore.execution.client import Client

    t = claimed(hb)
    out = t.suspend(AllOf(wait_on("a"), wait_on("b")), timeout_at=hb.now_ms() - 1, timeout_behavior="fail")
    assert SuspensionTimeoutScanner(hb).scan_partition(t.execution_id.partition_index, hb.now_ms()) == 1
    assert check(hb, t.execution_id)["public_state"] == "failed"
    assert Signals(hb).pending_waitpoints(t.execution_id) == []
    with pytest.raises(ERRORS["target_not_signalable"]):
        signal(hb, t.execution_id, out.waitpoint_id_for("b"), out.token_for("b"), "x")

    t = claimed(hb)
    out = t.suspend(AllOf(wait_on("a"), wait_on("b")))
    Client(hb).cancel(t.execution_id, reason="no longer needed")
    assert check(hb, t.execution_id)["public_state"] == "cancelled"
    assert Signals(hb).pending_waitpoints(t.execution_id) == []
    with pytest.raises(ERRORS["target_not_signalable"]):
        signal(hb, t.execution_id, out.waitpoint_id_for("b"), out.token_for("b"), "x")


def test_async_handlers_suspend_with_a_typed_condition(hb):
    import asyncio

    t = claimed(hb)
    out = asyncio.run(t.asuspend(any_of("approve", "reject"), idempotency_key="a-1"))
    assert t.consumed and check(hb, t.execution_id)["public_state"] == "suspended"
    assert signal(hb, t.execution_id, out.waitpoint_id, out.token, "reject").resumed


def test_operator_only_is_resumed_by_an_operator_not_by_signals(hb):
    t = claimed(hb)
    out = t.suspend(operator_only(), reason_code="waiting_for_operator_review")
    assert describe_json(susp(hb, t.execution_id)["resume_condition_json"]) == "an operator only"
    assert signal(hb, t.execution_id, out.waitpoint_id, out.token, "anything").effect == NO_OP
    assert Signals(hb).resume(t.execution_id) == "waiting"


def test_a_named_waitpoint_key_uses_the_contract_condition(hb):
    t = claimed(hb)
    out = t.suspend(n_of(2, "a", "b", "c"), waitpoint_key="order-7", requested_by="policy")
    assert out.waitpoint_key == "order-7" and not out.additional_waitpoints
    assert susp(hb, t.execution_id)["requested_by"] == "policy"
    assert signal(hb, t.execution_id, out.waitpoint_id, out.token, "c").effect == APPENDED
    assert signal(hb, t.execution_id, out.waitpoint_id, out.token, "a").resumed
