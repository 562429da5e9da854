"""Suspension timeouts (every behaviour) and pending-waitpoint expiry, driven by the scanners."""

from __future__ import annotations

import time

import pytest

from ffcore.engine.registry import build_scanners
from ffcore.engine.suspension_scanners import PendingWaitpointExpiryScanner, SuspensionTimeoutScanner
from ffcore.errors import ERRORS
from ffcore.functions import Signal
from ffcore.keys import ExecKeys
from ffcore.reads import decode_map
from ffcore.suspension.signals import Signals
from tests.ffcore.suspension_support import check, claim_again, claimed, core, signal, waitpoint


def _time_out(backend, t, behavior: str, names=("never",)):
    out = t.suspend(list(names), timeout_ms=5, timeout_behavior=behavior)
    scanner = SuspensionTimeoutScanner(backend)
    n = t.execution_id.partition_index
    assert scanner.scan_partition(n, backend.now_ms() - 1_000) == 0  # not due yet: nothing happens
    assert core(backend, t.execution_id)["public_state"] == "suspended"
    time.sleep(0.01)
    assert scanner.scan_partition(n, backend.now_ms()) == 1
    return out


@pytest.mark.parametrize(("behavior", "state", "close_reason", "attempt_state"), [
    ("fail", "failed", "timed_out_fail", "ended_failure"),
    ("cancel", "cancelled", "timed_out_cancel", "ended_cancelled"),
    ("expire", "expired", "timed_out_expire", "ended_failure"),
])
def test_a_terminal_timeout_behaviour_ends_the_execution(hb, behavior, state, close_reason, attempt_state):
    t = claimed(hb)
    out = _time_out(hb, t, behavior)
    c = check(hb, t.execution_id)
    assert (c["public_state"], c["failure_reason"]) == (state, f"suspension_timeout:{behavior}")
    wp = waitpoint(hb, t.execution_id, out.waitpoint_id)
    assert (wp["state"], wp["close_reason"]) == ("closed", close_reason)
    k = ExecKeys(t.execution_id)
    assert decode_map(hb.client.hgetall(k.attempt(t.attempt_index)))["attempt_state"] == attempt_state
    assert hb.client.zscore(k.idx.suspension_timeout, t.execution_id) is None
    with pytest.raises(ERRORS["target_not_signalable"]):
        signal(hb, t.execution_id, out.waitpoint_id, out.token, "never")


@pytest.mark.parametrize("behavior", ["auto_resume", "auto_resume_with_timeout_signal"])
def test_auto_resume_makes_it_claimable_again_without_signals(hb, behavior):
    t = claimed(hb)
    out = _time_out(hb, t, behavior)
    assert check(hb, t.execution_id)["public_state"] == "waiting"
    assert waitpoint(hb, t.execution_id, out.waitpoint_id)["close_reason"] == "timed_out_auto_resume"
    again = claim_again(hb, t.execution_id)
    assert again.attempt_type == "resumed" and again.attempt_index == t.attempt_index
    assert again.resume_signals() == []


def test_escalate_keeps_it_suspended_for_an_operator_and_clears_the_timeout(hb):
    t = claimed(hb)
    out = _time_out(hb, t, "escalate")
    c = check(hb, t.execution_id)
    assert (c["public_state"], c["blocking_reason"]) == ("suspended", "paused_by_operator")
    k = ExecKeys(t.execution_id)
    susp = decode_map(hb.client.hgetall(k.suspension_current))
    assert (susp["reason_code"], susp["timeout_at"], susp["timeout_behavior"]) == (
        "waiting_for_operator_review", "", "")
    assert hb.client.zscore(k.idx.suspension_timeout, t.execution_id) is None
    # A later scan leaves it alone, and the waitpoint still takes its signal.
    assert SuspensionTimeoutScanner(hb).scan_partition(t.execution_id.partition_index, hb.now_ms() + 10**6) == 0
    assert signal(hb, t.execution_id, out.waitpoint_id, out.token, "never").resumed


def test_an_unused_pending_waitpoint_is_closed_when_it_expires(hb):
    t = claimed(hb)
    pw = t.create_pending_waitpoint(expires_in_ms=5)
    k = ExecKeys(t.execution_id)
    scanner = PendingWaitpointExpiryScanner(hb)
    assert scanner.scan_partition(k.eid.partition_index, hb.now_ms() - 1_000) == 0
    time.sleep(0.01)
    assert scanner.scan_partition(k.eid.partition_index, hb.now_ms()) == 1
    wp = waitpoint(hb, t.execution_id, pw.waitpoint_id)
    assert (wp["state"], wp["close_reason"]) == ("closed", "never_committed")
    assert hb.client.zscore(k.idx.pending_waitpoint_expiry, pw.waitpoint_id) is None
    with pytest.raises(ERRORS["target_not_signalable"]):
        signal(hb, t.execution_id, pw.waitpoint_id, pw.token, "late")
    with pytest.raises(ERRORS["waitpoint_closed"]):
        Signals(hb).buffer(t.execution_id, pw.waitpoint_id, Signal("late"), pw.token)
    with pytest.raises(ERRORS["waitpoint_not_pending"]):
        t.suspend("late", waitpoint=pw)
    assert check(hb, t.execution_id)["public_state"] == "active"


def test_a_dangling_pending_expiry_entry_is_dropped(hb):
    ix = ExecKeys(claimed(hb).execution_id).idx
    hb.client.zadd(ix.pending_waitpoint_expiry, {"6ba7b810-9dad-11d1-80b4-00c04fd430c8": 1})
    assert PendingWaitpointExpiryScanner(hb).scan_partition(ix.n, hb.now_ms()) == 0
    assert hb.client.zcard(ix.pending_waitpoint_expiry) == 0


def test_the_scanner_process_runs_both_suspension_scanners(hb):
    names = {s.name for s in build_scanners(hb)}
    assert {"suspension_timeout", "pending_waitpoint_expiry"} <= names
    t = claimed(hb)
    t.suspend("x", timeout_ms=5, timeout_behavior="fail")
    time.sleep(0.01)
    [scanner] = [s for s in build_scanners(hb) if s.name == "suspension_timeout"]
    assert scanner.tick() == 1
    assert core(hb, t.execution_id)["public_state"] == "failed"
