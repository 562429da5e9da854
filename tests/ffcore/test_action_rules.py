"""The action rule table (ffcore.execution.rules) says exactly what the engine does (issue #25, item 2).

Every public state crossed with every operator action, against the real functions: an action the
table allows succeeds (status OK), one it refuses is refused with the table's code and changes nothing.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ffcore.errors import ScriptError
from ffcore.execution import rules
from ffcore.execution.client import Client
from ffcore.flows.flows import Flows
from ffcore.keys import ExecKeys
from ffcore.worker.grants import issue_grant_and_claim
from tests import state_zoo


def _apply(c: Client, action: str, eid: str):
    if action == "cancel":
        return c.cancel(eid, reason="matrix")
    if action == "replay":
        return c.replay(eid)
    if action == "revoke":
        return c.revoke_lease(eid, reason="matrix")
    if action == "take":
        issue_grant_and_claim(c.backend, eid, lease_duration_ms=30_000)
        return SimpleNamespace(status="OK")
    return c.change_priority(eid, 7)


def test_every_state_and_action_is_refused_by_the_engine_exactly_when_the_table_refuses(backend):
    zoo = state_zoo.build(backend, copies=len(rules.EXECUTION_ACTIONS))
    c = Client(backend)
    seen_allowed: set[tuple[str, str]] = set()
    for state, eids in zoo.items():
        for action, eid in zip(rules.EXECUTION_ACTIONS, eids, strict=True):
            core = {k: (v.decode() if isinstance(v, bytes) else v or "") for k, v in
                    zip(rules.RULE_FIELDS, backend.client.hmget(ExecKeys(eid).core, rules.RULE_FIELDS), strict=True)}
            expected = rules.refusal(action, core)
            before = backend.client.hgetall(ExecKeys(eid).core)
            try:
                reply = _apply(c, action, eid)
            except ScriptError as e:
                assert expected == e.code, (state, action, e.code)
                assert backend.client.hgetall(ExecKeys(eid).core) == before, (state, action)
            else:
                assert expected is None, (state, action, expected)
                assert reply.status == "OK", (state, action, reply)
                seen_allowed.add((state, action))
    # The rows the table allows, spelled out (a typo in the table would also show here).
    assert seen_allowed == {(s, "cancel") for s in ("waiting", "delayed", "rate_limited", "waiting_children",
                                                    "active", "suspended")} | {
        (s, "replay") for s in ("completed", "failed", "cancelled", "expired", "skipped")} | {
        ("active", "revoke"), ("waiting", "priority"), ("waiting", "take")}


def test_replay_is_refused_once_the_policy_s_replays_are_used(backend):
    core = {"lifecycle_phase": "terminal", "replay_count": "3"}
    assert rules.refusal("replay", core, max_replays=3) == "max_replays_exhausted"
    assert rules.refusal("replay", core) is None
    with pytest.raises(ValueError):
        rules.refusal("explode", core)


def test_cancel_flow_is_offered_on_open_flows_and_the_engine_agrees_it_is_a_no_op_on_cancelled_ones(backend):
    flows = Flows(backend)
    fid = flows.create(kind="rule")
    flows.build(fid, [{"kind": "a", "lane": "rule"}], [])
    assert rules.flow_cancel_refusal(flows.get(fid).state) is None
    assert flows.cancel(fid, reason="matrix", wait=True).status == "cancelled"
    state = flows.get(fid).state
    assert rules.flow_cancel_refusal(state) == "flow_already_terminal"
    assert flows.cancel(fid, reason="again", wait=True).status == "already_terminal"
