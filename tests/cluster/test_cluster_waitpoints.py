"""Waitpoints on the local 3-primary cluster: suspended executions on every primary are listed by the inbox
(merged across nodes, the waitpoints of one execution found by SSCAN on its slot), signals resume them,
and the suspension scanners time out and expire what nobody signalled."""

from __future__ import annotations

import time

import pytest

from ffcore.backend import Backend
from ffcore.engine.suspension_scanners import PendingWaitpointExpiryScanner, SuspensionTimeoutScanner
from ffcore.suspension.inbox import InboxQuery, list_suspended, open_waitpoints
from tests.ffcore.suspension_support import check, claim_again, claimed, signal, waitpoint, with_secrets

LANES = tuple(f"wp-{i}" for i in range(6))


@pytest.fixture
def hb(cbackend: Backend) -> Backend:
    return with_secrets(cbackend)


def test_the_inbox_lists_waitpoints_from_every_primary_and_signals_resume_them(hb: Backend):
    suspended = {}
    for i, lane in enumerate(LANES):
        t = claimed(hb, lane=lane, kind="approve")
        out = t.suspend("approved", timeout_ms=60_000 + i * 1_000)
        suspended[out.waitpoint_id] = (t, out)
    assert len({t.execution_id.partition_index for t, _ in suspended.values()}) > 3
    pending_task = claimed(hb, lane=LANES[0], kind="callback")
    pending = pending_task.create_pending_waitpoint(expires_in_ms=30_000)

    rows = open_waitpoints(hb, InboxQuery(limit=100), LANES).rows
    assert [r.waitpoint_id for r in rows] == [pending.waitpoint_id, *suspended]  # soonest timeout first
    assert {r.waitpoint_id for r in list_suspended(hb, LANES).rows} == set(suspended)
    mine = open_waitpoints(hb, InboxQuery(execution=str(pending_task.execution_id)), LANES).rows
    assert [r.waitpoint_id for r in mine] == [pending.waitpoint_id]

    for t, out in suspended.values():
        got = signal(hb, t.execution_id, out.waitpoint_id, out.token, "approved", payload=b"yes")
        assert got.resumed
        again = claim_again(hb, t.execution_id)
        assert [s.signal_name for s in again.resume_signals()] == ["approved"]
        again.complete(b"done")
        assert check(hb, t.execution_id)["public_state"] == "completed"
    assert list_suspended(hb, LANES).rows == []


def test_the_suspension_scanners_time_out_and_expire_on_every_primary(hb: Backend):
    timed = []
    for lane in LANES:
        t = claimed(hb, lane=lane)
        timed.append((t, t.suspend("never", timeout_ms=1, timeout_behavior="fail")))
    holder = claimed(hb, lane=LANES[1])
    pw = holder.create_pending_waitpoint(expires_in_ms=1)
    time.sleep(0.01)
    assert SuspensionTimeoutScanner(hb).tick() == len(LANES)
    assert PendingWaitpointExpiryScanner(hb).tick() == 1
    for t, out in timed:
        assert check(hb, t.execution_id)["public_state"] == "failed"
        assert waitpoint(hb, t.execution_id, out.waitpoint_id)["close_reason"] == "timed_out_fail"
    assert waitpoint(hb, holder.execution_id, pw.waitpoint_id)["close_reason"] == "never_committed"
