"""The fleet-wide listing of open waitpoints: order, cursor paging, filters, no tokens."""

from __future__ import annotations

import pytest

from ffcore.errors import InvalidInput
from ffcore.suspension.inbox import InboxQuery, list_suspended, open_waitpoints
from tests.ffcore.suspension_support import claimed

LANES = ("default", "gpu", "mail", "etl")


@pytest.fixture
def fleet(hb):
    """Suspended executions on four lanes (so several partitions) with distinct timeouts, plus pending ones."""
    made = {}
    for i in range(10):
        lane = LANES[i % 4]
        t = claimed(hb, lane=lane, kind="approve" if i % 2 else "ingest")
        timeout = None if i == 9 else 60_000 + i * 1_000
        out = t.suspend(["approved"] if i % 3 else ["a", "b"], timeout_ms=timeout)
        made[out.waitpoint_id] = (t.execution_id, lane, "active")
    for lane in ("default", "gpu"):
        t = claimed(hb, lane=lane, kind="callback")
        pw = t.create_pending_waitpoint(expires_in_ms=30_000)
        made[pw.waitpoint_id] = (t.execution_id, lane, "pending")
    return made


def _all_pages(hb, q: InboxQuery):
    rows, cursor, pages = [], None, 0
    while True:
        page = open_waitpoints(hb, InboxQuery(**{**q.__dict__, "cursor": cursor}), LANES)
        rows += page.rows
        pages += 1
        cursor = page.next_cursor
        if not cursor:
            return rows, pages


def test_every_open_waitpoint_is_listed_once_soonest_timeout_first(hb, fleet):
    rows, pages = _all_pages(hb, InboxQuery(limit=3))
    assert pages >= 4
    assert sorted(r.waitpoint_id for r in rows) == sorted(fleet)
    keys = [r.timeout_at or 9_999_999_999_999 for r in rows]
    assert keys == sorted(keys)
    assert rows[0].state == "pending"  # the pending ones expire first (30 s)
    assert rows[-1].timeout_at is None
    for r in rows:
        eid, lane, state = fleet[r.waitpoint_id]
        assert (r.execution_id, r.lane, r.state) == (eid, lane, state)
        assert "k1:" not in repr(r)  # rows never carry tokens


def test_rows_describe_the_condition(hb, fleet):
    rows, _ = _all_pages(hb, InboxQuery(state="active", limit=50))
    both = [r for r in rows if r.names == ["a", "b"]]
    one = [r for r in rows if r.names == ["approved"]]
    assert len(both) == 4 and len(one) == 6
    assert {r.match_mode for r in both} == {"all"} and {r.match_mode for r in one} == {"any"}
    assert all(r.created_at > 0 and r.waitpoint_key.startswith("wpk:") for r in rows)


@pytest.mark.parametrize(("q", "expected"), [
    (InboxQuery(lane="gpu"), lambda f: {w for w, (_, lane, _) in f.items() if lane == "gpu"}),
    (InboxQuery(state="pending"), lambda f: {w for w, (_, _, s) in f.items() if s == "pending"}),
    (InboxQuery(state="active", lane="mail"), lambda f: {w for w, (_, lane, s) in f.items()
                                                         if s == "active" and lane == "mail"}),
])
def test_filters_narrow_the_list(hb, fleet, q, expected):
    rows, _ = _all_pages(hb, InboxQuery(**{**q.__dict__, "limit": 2}))
    assert {r.waitpoint_id for r in rows} == expected(fleet)


def test_kind_and_signal_filters(hb, fleet):
    rows, _ = _all_pages(hb, InboxQuery(kind="callback"))
    assert {r.state for r in rows} == {"pending"} and len(rows) == 2
    rows, _ = _all_pages(hb, InboxQuery(signal="b", state="active"))
    assert len(rows) == 4 and all("b" in r.names for r in rows)


def test_the_waitpoints_of_one_execution(hb, fleet):
    wid, (eid, _, _) = next((w, v) for w, v in fleet.items() if v[2] == "pending")
    page = open_waitpoints(hb, InboxQuery(execution=eid), LANES)
    assert [r.waitpoint_id for r in page.rows] == [wid]


def test_a_resumed_execution_leaves_the_list(hb, fleet):
    from ffcore.functions import Signal
    from ffcore.suspension.signals import Signals

    wid, (eid, _, _) = next((w, v) for w, v in fleet.items() if v[2] == "active")
    Signals(hb).deliver_with_stored_token(eid, wid, Signal("approved"))
    Signals(hb).deliver_with_stored_token(eid, wid, Signal("a"))
    Signals(hb).deliver_with_stored_token(eid, wid, Signal("b"))
    rows, _ = _all_pages(hb, InboxQuery())
    assert wid not in {r.waitpoint_id for r in rows} and len(rows) == len(fleet) - 1


def test_suspended_executions_fleet_wide(hb, fleet):
    page = list_suspended(hb, LANES, limit=4)
    assert len(page.rows) == 4 and page.next_cursor
    nxt = list_suspended(hb, LANES, limit=50, cursor=page.next_cursor)
    assert len(page.rows) + len(nxt.rows) == 10 and nxt.next_cursor is None
    assert all(r.state == "active" and r.public_state == "suspended" for r in page.rows + nxt.rows)


def test_bad_queries_are_refused(hb):
    with pytest.raises(InvalidInput):
        open_waitpoints(hb, InboxQuery(state="closed"), LANES)
    with pytest.raises(InvalidInput):
        open_waitpoints(hb, InboxQuery(limit=0), LANES)
    with pytest.raises(InvalidInput):
        open_waitpoints(hb, InboxQuery(cursor="nonsense"), LANES)
