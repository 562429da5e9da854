"""An execution's History (ffcore.execution.history) read from a real Valkey, and the traceback the worker keeps."""

from __future__ import annotations

import time

from ffcore import audit
from ffcore.engine.stream_scanners import delete_execution
from ffcore.execution import history, tracebacks
from ffcore.execution.client import Client
from ffcore.keys import ExecKeys
from ffcore.policy import Backoff, Policy, RetryPolicy
from ffcore.worker.worker import Registry, Worker, WorkerConfig
from tests.ffcore.invariants import create, promote
from tests.ffcore.roundtrips import counting_pipelines
from tests.ffcore.suspension_support import claim_again, signal, with_secrets


def kinds(entries: list[history.Entry]) -> list[str]:
    return [e.kind for e in entries]


def _retrying(backend):
    return create(backend, policy=Policy(retry=RetryPolicy(max_retries=2, backoff=Backoff(kind="fixed", delay_ms=1))))


def _claim_when_due(backend, eid):
    deadline = time.monotonic() + 5
    while True:
        promote(backend, eid, lane="default", now_ms=backend.now_ms())  # due by the server clock, as the scanner
        try:
            return claim_again(backend, eid)
        except AssertionError:
            assert time.monotonic() < deadline, "the retry never became claimable"
            time.sleep(0.01)


def test_a_whole_run_reads_in_order_from_creation_to_completion(backend):
    hb = with_secrets(backend)
    eid = _retrying(hb)
    t = claim_again(hb, eid)
    t.renew()
    t.renew()
    t.update_progress(40, "reading rows")
    t.append_frame("log", "line one")
    t.append_frame("log", "line two")
    out = t.fail("ValueError: bad row", "ValueError")
    assert out.retry_scheduled
    t2 = _claim_when_due(hb, eid)
    sus = t2.suspend("approved", timeout_ms=60_000)
    assert signal(hb, eid, sus.waitpoint_id, sus.token, "approved", source_identity="ann").resumed
    t3 = claim_again(hb, eid)
    t3.complete(b"done")

    entries = history.read(hb, eid)
    assert entries is not None
    ks = kinds(entries)
    assert ks[0] == "created"
    order = ["created", "claimed", "renewed", "failed", "eligible", "claimed", "suspended", "signal", "resumed",
             "completed"]
    rest = iter(ks)
    assert all(k in rest for k in order), " ".join(f"{e.ts % 100000}:{e.kind}" for e in entries)  # in order
    assert ks[-1] == "completed"
    assert [e.ts for e in entries] == sorted(e.ts for e in entries)
    failed = next(e for e in entries if e.kind == "failed")
    assert failed.title == "Failed, retry 1 of 2" and "ValueError: bad row" in failed.detail and failed.attempt == 0
    assert "backing off until" in failed.detail
    renewed = next(e for e in entries if e.kind == "renewed")
    assert renewed.title == "Renewed 2×" and renewed.actor == "w-1" and "between" in renewed.detail
    frames = next(e for e in entries if e.kind == "frames")
    assert frames.title == "2 frames appended"
    assert next(e for e in entries if e.kind == "progress").detail == "40% reading rows"
    sig = next(e for e in entries if e.kind == "signal")
    assert sig.actor == "ann" and sus.waitpoint_id in sig.detail
    assert any(e.kind == "waitpoint" and "approved" in e.detail for e in entries)
    claims = [e for e in entries if e.kind in ("claimed", "resumed") and e.title.startswith("Claimed")]
    assert [e.attempt for e in claims] == [0, 1, 1] and claims[-1].title == "Claimed (resumed)"


def test_operator_actions_show_who_did_them_and_why(backend):
    eid = create(backend, priority=5)
    c = Client(backend)
    c.change_priority(eid, 7)
    audit.record(backend, actor="ops:ann", action="change_priority", target=str(eid), reason="customer waiting",
                 outcome="ok", detail="priority=7")
    c.set_tags(eid, {"app.team": "billing"})
    audit.record(backend, actor="token", action="set_tags", target=str(eid), reason="triage", outcome="ok",
                 detail="app.team=billing")
    c.cancel(eid, reason="duplicate order")
    audit.record(backend, actor="ops:bob", action="cancel", target=str(eid), reason="duplicate order", outcome="ok")
    entries = history.read(backend, eid)
    assert entries is not None
    by_kind = {e.kind: e for e in entries}
    assert "priority" not in by_kind["created"].detail  # the core holds the current one only
    assert by_kind["priority"].actor == "ops:ann" and "customer waiting" in by_kind["priority"].detail
    assert by_kind["tags"].actor == "token" and "app.team=billing" in by_kind["tags"].detail
    cancels = [e for e in entries if e.kind == "cancelled"]
    assert [e.actor for e in cancels] == ["ops:bob"] and "duplicate order" in cancels[0].detail


def test_a_replay_is_listed_after_the_failure_it_follows(backend):
    eid = create(backend)
    claim_again(backend, eid).fail("RuntimeError: nope", "RuntimeError")
    Client(backend).replay(eid)
    ks = kinds(history.read(backend, eid) or [])
    assert ks.index("failed") < ks.index("replayed")


def test_renewals_fold_into_one_entry_per_attempt(backend):
    eid = create(backend)
    t = claim_again(backend, eid)
    for _ in range(14):
        t.renew()
    entries = history.read(backend, eid) or []
    renewed = [e for e in entries if e.kind == "renewed"]
    assert [e.title for e in renewed] == ["Renewed 14×"]


def test_a_long_history_is_paged_with_a_cursor(backend):
    eid = create(backend)
    t = claim_again(backend, eid)
    for n in range(30):
        t.update_progress(n, f"step {n}")
    with counting_pipelines(backend) as trips:
        whole = history.read(backend, eid) or []
    assert len(trips) == 2  # whatever the length
    first = history.page(backend, eid, limit=10)
    assert first is not None and len(first.entries) == 10 and first.total == len(whole) and first.next_cursor
    seen = list(first.entries)
    cursor = first.next_cursor
    while cursor:
        nxt = history.page(backend, eid, cursor, limit=10)
        assert nxt is not None
        seen += nxt.entries
        cursor = nxt.next_cursor
    assert seen == whole


def test_an_unknown_execution_has_no_history(backend):
    eid = create(backend)
    ExecKeys(eid)
    backend.client.delete(ExecKeys(eid).core)
    assert history.read(backend, eid) is None


def _worker(backend, handler, kind="job"):
    reg = Registry()
    reg.handler(kind)(handler)
    return Worker(backend, WorkerConfig(lanes=("default",), worker_id="w", worker_instance_id="w-tb"), reg)


def _run_one(backend, handler):
    eid = create(backend)
    w = _worker(backend, handler)
    [task] = w.claim_next(1)
    w.execute(task)
    return eid


def _parse_amount(row):
    return float(row["amount"])


def test_a_failing_handler_leaves_its_traceback_with_the_attempt(backend):
    def handler(task):
        return _parse_amount({"amount": "twelve"})

    eid = _run_one(backend, handler)
    tb = tracebacks.read_many(backend, eid, [0])[0]
    assert tb.startswith("Traceback (most recent call last)")
    assert "_parse_amount" in tb and tb.rstrip().endswith("ValueError: could not convert string to float: 'twelve'")


def test_an_async_handler_traceback_is_kept_too(backend):
    async def handler(task):
        raise KeyError("missing field")

    eid = _run_one(backend, handler)
    tb = tracebacks.read_many(backend, eid, [0])[0]
    assert tb.startswith("Traceback (most recent call last)") and "in handler" in tb and "KeyError" in tb


def test_a_huge_traceback_keeps_its_tail_within_16_kib(backend):
    def down(n):
        if n == 0:
            raise OverflowError("the bottom")
        return further(n - 1)

    def further(n):  # two alternating frames: Python folds only a frame repeating itself
        return down(n)

    def handler(task):
        return down(300)

    eid = _run_one(backend, handler)
    tb = tracebacks.read_many(backend, eid, [0])[0]
    assert len(tb.encode()) <= tracebacks.TRACEBACK_MAX_BYTES
    assert tb.startswith("Traceback (most recent call last)") and tracebacks.CUT_MARK in tb
    assert tb.rstrip().endswith("OverflowError: the bottom")


def test_the_traceback_and_history_records_go_away_with_the_execution(backend):
    def handler(task):
        task.update_progress(10)
        raise ValueError("x")

    eid = _run_one(backend, handler)
    k = ExecKeys(eid)
    assert backend.client.exists(k.attempt_traceback(0), k.journal) == 2
    delete_execution(backend, str(eid), "default")
    assert backend.client.exists(k.attempt_traceback(0), k.journal, k.renewals) == 0


def test_a_revoked_lease_then_a_reclaim_then_a_cancel_by_the_engine_read_in_order(backend):
    from tests.ffcore.invariants import LANE, OTHER_WIID, claim, reclaim

    eid = create(backend, lane=LANE)
    claim(backend, eid, lane=LANE)
    Client(backend).revoke_lease(eid, reason="stuck worker")
    reclaim(backend, eid)
    Client(backend).cancel(eid, reason="no longer needed", source="ops-console")
    entries = history.read(backend, eid) or []
    ks = kinds(entries)
    rest = iter(ks)
    assert all(k in rest for k in ["created", "claimed", "revoked", "reclaimed", "cancelled"]), ks
    assert next(e for e in entries if e.kind == "revoked").detail == "stuck worker"
    assert next(e for e in entries if e.kind == "reclaimed").actor == OTHER_WIID
    cancelled = next(e for e in entries if e.kind == "cancelled")
    assert (cancelled.actor, cancelled.detail) == ("ops-console", "no longer needed")


def test_an_expired_lease_is_put_on_the_scanner_and_its_reclaim_on_the_new_worker(backend):
    from ffcore import functions as F
    from tests.ffcore.invariants import LANE, OTHER_WIID, WIID, claim, reclaim

    eid = create(backend, lane=LANE)
    claim(backend, eid, lane=LANE, ttl_ms=50)
    deadline = time.monotonic() + 5
    while backend.call(F.mark_lease_expired_if_due(ExecKeys(eid))).fields != ["marked_expired"]:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    reclaim(backend, eid)
    entries = history.read(backend, eid) or []
    expired = next(e for e in entries if e.kind == "expired")
    assert expired.actor == history.SCANNER and WIID in expired.detail
    assert kinds(entries).index("expired") < kinds(entries).index("reclaimed")
    assert next(e for e in entries if e.kind == "reclaimed").actor == OTHER_WIID


def test_a_delayed_creation_reads_delayed_then_eligible_once_the_delay_is_over(backend):
    eid = create(backend, delay_until=backend.now_ms() + 30)
    before = kinds(history.read(backend, eid) or [])
    assert before == ["created", "delayed"]
    time.sleep(0.05)
    assert kinds(history.read(backend, eid) or []) == ["created", "delayed", "eligible"]
