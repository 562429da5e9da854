"""Composite suspends in upstream v0.13's form (#39 item 2): Count with DistinctSources / DistinctSignals /
DistinctWaitpoints, the stored {"v":1,"composite":true,"tree":…}, upstream's satisfied set, and delivery by
the contract's own ff_deliver_signal (14 KEYS, as an upstream client sends it)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from ffcore import functions as F
from ffcore.keys import ExecKeys
from ffcore.reads import decode_map
from ffcore.suspension.conditions import (
    DISTINCT_SIGNALS,
    AllOf,
    Count,
    any_of,
    describe_json,
    distinct_signals,
    distinct_sources,
    wait_on,
)
from ffcore.suspension.signals import APPENDED, NO_OP, RESUMED, Signal
from tests.ffcore.suspension_support import check, claim_again, claimed, signal
from tests.ffcore.suspension_support import suspension as susp


def tokens(hb, eid) -> set[str]:
    return {t.decode() for t in hb.client.smembers(ExecKeys(eid).suspension_satisfied_set)}


def test_distinct_sources_needs_two_different_senders_not_two_signals_from_one(hb):
    t = claimed(hb)
    out = t.suspend(distinct_sources(2, "approvals", name="approve"))
    eid, wid, tok = t.execution_id, out.waitpoint_id, out.token
    assert describe_json(susp(hb, eid)["resume_condition_json"]) == "2 distinct senders of approve on approvals"
    assert signal(hb, eid, wid, tok, "approve", source_type="user", source_identity="ann").effect == APPENDED
    assert signal(hb, eid, wid, tok, "approve", source_type="user", source_identity="ann").effect == NO_OP
    assert signal(hb, eid, wid, tok, "reject", source_type="user", source_identity="bob").effect == NO_OP
    assert check(hb, eid)["public_state"] == "suspended"
    assert "src:user:ann" in tokens(hb, eid)  # upstream's token, kept beside ours
    got = signal(hb, eid, wid, tok, "approve", source_type="user", source_identity="bob")
    assert got.resumed and check(hb, eid)["public_state"] == "waiting"
    who = sorted(s.source_identity for s in claim_again(hb, eid).resume_signals())
    assert who == ["ann", "bob"]
    assert not hb.client.exists(ExecKeys(eid).suspension_satisfied_set)  # dropped on resume


def test_distinct_signals_counts_every_signal_across_its_waitpoints(hb):
    t = claimed(hb)
    out = t.suspend(distinct_signals(3, "a", "b"))
    eid = t.execution_id
    a, b = (out.waitpoint_id_for("a"), out.token_for("a")), (out.waitpoint_id_for("b"), out.token_for("b"))
    assert signal(hb, eid, *a, "x", source_identity="same").effect == APPENDED
    assert signal(hb, eid, *a, "x", source_identity="same").effect == APPENDED  # a new signal id counts
    assert check(hb, eid)["public_state"] == "suspended"
    assert signal(hb, eid, *b, "y").effect == RESUMED
    record = susp(hb, eid)
    assert len(json.loads(record["all_satisfier_signals"])) == 3 and record["closer_signal_id"]


def test_the_stored_condition_is_upstreams_composite_tree_with_paths(hb):
    t = claimed(hb)
    out = t.suspend(AllOf(wait_on("legal", "ok"), Count(1, DISTINCT_SIGNALS, "finance", name="waive")))
    eid = t.execution_id
    sent = json.loads(susp(hb, eid)["resume_condition_json"])
    assert (sent["v"], sent["composite"]) == (1, True)
    assert sent["tree"] == {"kind": "AllOf", "members": [
        {"kind": "Single", "waitpoint_key": "legal", "matcher": {"kind": "ByName", "name": "ok"}},
        {"kind": "Count", "n": 1, "count_kind": "DistinctSignals", "waitpoints": ["finance"],
         "matcher": {"kind": "ByName", "name": "waive"}}]}
    k = ExecKeys(eid)
    for w in (out.waitpoint_id, out.waitpoint_id_for("finance")):
        cond = decode_map(hb.client.hgetall(k.idx.waitpoint_condition(w)))
        assert (cond["composite"], cond["condition_type"], cond["closed"]) == ("1", "composite", "0")
        stored = json.loads(cond["tree_json"])
        assert [m["path"] for m in stored["members"]] == ["members[0]", "members[1]"]
    assert decode_map(hb.client.hgetall(k.suspension_member_map)) == {
        "wp:legal:members[0]": "members[0]", "wp:finance:members[1]": "members[1]"}


def test_an_upstream_shaped_ff_deliver_signal_call_resumes_a_composite(hb):
    t = claimed(hb)
    out = t.suspend(AllOf(wait_on("legal", "ok"), wait_on("finance", any_of("ok", "waive"))))
    eid, k = t.execution_id, ExecKeys(t.execution_id)
    legal, finance = out.waitpoint_id, out.waitpoint_id_for("finance")

    def raw(wid: str, token: str, name: str, sid: str) -> F.Reply:
        call = F.deliver_signal(k, lane="default", waitpoint_id=wid, signal_id=sid, signal=Signal(name), token=token)
        assert len(call.keys) == 15 and call.keys[14] == k.idx.signal_delivery
        return hb.call(dataclasses.replace(call, keys=call.keys[:14]))  # v0.2.0's shape, as an old client sends it

    sid1, sid2 = "0b6f2a4e-5a31-4b8e-9a55-1d2c3b4a5e61", "0b6f2a4e-5a31-4b8e-9a55-1d2c3b4a5e62"
    assert raw(legal, out.token, "ok", sid1).fields == [sid1, APPENDED]
    assert "leaf:members[0]" in tokens(hb, eid)
    assert raw(finance, out.token_for("finance"), "waive", sid2).fields == [sid2, RESUMED]
    assert check(hb, eid)["public_state"] == "waiting"
    record = susp(hb, eid)
    assert record["closer_signal_id"] == sid2 and sorted(json.loads(record["all_satisfier_signals"])) == [sid1, sid2]
    for w in (legal, finance):
        assert decode_map(hb.client.hgetall(k.idx.waitpoint_condition(w)))["closed"] == "1"


def test_count_input_is_checked_naming_the_field(hb):
    for make, field in [(lambda: Count(0, DISTINCT_SIGNALS, "a"), "count_n_zero"),
                        (lambda: Count(1, "Sometimes", "a"), "count_kind"),
                        (lambda: Count(1, DISTINCT_SIGNALS), "count_waitpoints_empty"),
                        (lambda: distinct_sources(1, "a", name=""), "name")]:
        with pytest.raises(ValueError, match=field):
            make()
    t = claimed(hb)
    with pytest.raises(ValueError, match="waitpoint_key"):
        t.suspend(AllOf(wait_on("a"), distinct_signals(1, "a")))
    assert t.suspend("fine").waitpoint_id  # nothing was sent: the task still holds its lease


def test_ff_suspend_execution_in_upstreams_v013_shape_suspends_on_a_composite(hb):
    t = claimed(hb)
    a, b = "1a6f2a4e-5a31-4b8e-9a55-1d2c3b4a5e61", "1a6f2a4e-5a31-4b8e-9a55-1d2c3b4a5e62"
    cond = json.dumps({"v": 1, "composite": True, "tree": {"kind": "Count", "n": 2, "count_kind": "DistinctWaitpoints",
                                                           "waitpoints": ["ka", "kb"]}})
    typed = F.suspend_typed(t.keys, t.fence, suspension_id="2a6f2a4e-5a31-4b8e-9a55-1d2c3b4a5e60",
                            waitpoints=[(a, "ka"), (b, "kb")], condition_json=cond, policy_json="{}")
    call = F.Call("ff_suspend_execution", typed.keys, typed.args)  # what an upstream v0.13 client sends
    assert len(call.keys) == 21 and len(call.args) == 22
    reply = hb.call(call)
    eid = t.execution_id
    assert reply.status == "OK" and reply.fields[1] == a and reply.fields[4] == "1" and reply.fields[5] == b
    assert check(hb, eid)["public_state"] == "suspended"
    token_a, token_b = reply.fields[3], reply.fields[7]
    assert signal(hb, eid, a, token_a, "x").effect == APPENDED
    assert signal(hb, eid, a, token_a, "y").effect == NO_OP  # the same waitpoint counts once
    assert signal(hb, eid, b, token_b, "z").resumed


def test_retention_deletes_a_composites_satisfied_set_with_the_execution(hb):
    from ffcore.engine.stream_scanners import delete_execution
    from ffcore.execution.client import Client

    t = claimed(hb)
    out = t.suspend(distinct_sources(2, "approvals"))
    eid, k = t.execution_id, ExecKeys(t.execution_id)
    signal(hb, eid, out.waitpoint_id, out.token, "approve", source_identity="ann")
    assert hb.client.exists(k.suspension_satisfied_set, k.suspension_member_map) == 2
    Client(hb).cancel(eid, reason="no longer needed")
    delete_execution(hb, eid, "default")
    assert hb.client.exists(k.suspension_satisfied_set, k.suspension_satisfied_signals, k.suspension_member_map) == 0
