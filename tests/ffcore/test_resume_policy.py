"""A configurable ResumePolicy (#39 item 7): a suspend stores the seed's canonical defaults unless given one."""

from __future__ import annotations

import json

import pytest

from ffcore.keys import ExecKeys
from ffcore.suspension.resume_policy import ResumePolicy
from tests.ffcore.suspension_support import claimed, core, with_secrets


def _stored(backend, eid: str) -> dict:
    return json.loads(backend.client.hget(ExecKeys(eid).suspension_current, "resume_policy_json"))


def test_a_suspend_without_a_resume_policy_stores_the_seeds_defaults(backend):
    hb = with_secrets(backend)
    t = claimed(hb)
    t.suspend("approved", timeout_ms=60_000)
    assert _stored(hb, t.execution_id) == {"resume_target": "runnable", "consume_matched_signals": True,
                                           "retain_signal_buffer_until_closed": False,
                                           "close_waitpoint_on_resume": True}


def test_a_given_resume_policy_is_stored_as_given(backend):
    hb = with_secrets(backend)
    t = claimed(hb)
    t.suspend("approved", timeout_ms=60_000,
              resume_policy=ResumePolicy(retain_signal_buffer_until_closed=True, consume_matched_signals=False,
                                         resume_delay_ms=250))
    assert _stored(hb, t.execution_id) == {"resume_target": "runnable", "consume_matched_signals": False,
                                           "retain_signal_buffer_until_closed": True, "resume_delay_ms": 250,
                                           "close_waitpoint_on_resume": True}


@pytest.mark.parametrize(("kw", "field"), [
    ({"resume_target": "elsewhere"}, "resume_target"),
    ({"consume_matched_signals": "yes"}, "consume_matched_signals"),
    ({"resume_delay_ms": -1}, "resume_delay_ms"),
])
def test_a_resume_policy_it_cannot_keep_is_refused_naming_the_field(kw, field):
    with pytest.raises(ValueError, match=f"resume_policy.{field}"):
        ResumePolicy(**kw)


def test_a_suspend_given_something_else_as_its_resume_policy_sends_nothing(backend):
    hb = with_secrets(backend)
    t = claimed(hb)
    with pytest.raises(ValueError, match="resume_policy"):
        t.suspend("approved", resume_policy={"retain_signal_buffer_until_closed": True})
    assert core(hb, t.execution_id)["public_state"] == "active"
