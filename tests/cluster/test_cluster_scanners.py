"""The scanners and bulk actions on the local 3-primary cluster: each scanner of `ffscanners` ticks over
every partition without an error, the index reconciler lists and registers foreign creates, the delayed
promoter and the timeout scanners act on every primary, and a bulk cancel / replay covers every partition."""

from __future__ import annotations

import time

from ffcore.backend import Backend
from ffcore.engine.delayed import DelayedPromoter
from ffcore.engine.index_reconciler import IndexReconciler
from ffcore.engine.registry import build_scanners
from ffcore.engine.timeouts import AttemptTimeoutScanner, ExecutionDeadlineScanner
from ffcore.execution import bulk, listing
from ffcore.execution.client import Client
from ffcore.ids import ExecutionId
from ffcore.policy import Policy
from ffcore.worker.worker import Registry, Worker, WorkerConfig
from tests.ffcore.invariants import check

LANES = tuple(f"sc-{i}" for i in range(8))


def _states(backend: Backend, eids: list[str]) -> set[str]:
    return {check(backend, e)["public_state"] for e in eids}


def test_every_scanner_ticks_over_the_cluster_without_an_error(cbackend: Backend):
    c = Client(cbackend)
    c.create_many([{"kind": "k", "lane": lane} for lane in LANES])
    Worker(cbackend, WorkerConfig(lanes=LANES, concurrency=4), Registry()).claim_next(4)
    scanners = build_scanners(cbackend)
    for s in scanners:
        s.interval_ms = min(s.interval_ms, 100)  # the completion listener listens for one interval
        s.tick()
    assert {s.name: s.stats.errors for s in scanners if s.stats.errors} == {}
    assert all(s.stats.ticks == 1 for s in scanners)


def test_foreign_creates_on_every_primary_are_listed_and_registered(cbackend: Backend):
    c = Client(cbackend)
    foreign = [str(cbackend.call(c.create_call(kind="foreign", lane=lane, payload=b""))[0]) for lane in LANES]
    assert len({ExecutionId(e).partition_index for e in foreign}) > 3
    assert listing.list_executions(cbackend, listing.Query(limit=50), LANES).rows == []
    assert IndexReconciler(cbackend, batch=50).tick() == len(foreign)
    rows = listing.list_executions(cbackend, listing.Query(limit=50), LANES).rows
    assert sorted(r["execution_id"] for r in rows) == sorted(foreign)
    w = Worker(cbackend, WorkerConfig(lanes=LANES, concurrency=16), Registry())
    w.claimer._registry_at = float("-inf")  # read the lane registry the reconciler just filled
    assert sorted(t.execution_id for _ in range(4) for t in w.claim_next(16)) == sorted(foreign)


def test_delays_and_timeouts_are_acted_on_across_primaries(cbackend: Backend):
    c = Client(cbackend)
    soon = cbackend.now_ms() + 100
    delayed = [str(c.create(kind="k", lane=lane, delay_until=soon).execution_id) for lane in LANES]
    timed = [str(c.create(kind="k", lane=lane, policy=Policy(attempt_timeout_ms=100)).execution_id) for lane in LANES]
    late = [str(c.create(kind="k", lane=lane, deadline_at=cbackend.now_ms() + 100).execution_id) for lane in LANES]
    w = Worker(cbackend, WorkerConfig(lanes=LANES, concurrency=32), Registry())
    claimed = {t.execution_id for _ in range(4) for t in w.claim_next(32)}
    assert set(timed) | set(late) <= claimed
    time.sleep(0.15)
    assert DelayedPromoter(cbackend).tick() == len(delayed)
    assert _states(cbackend, delayed) == {"waiting"}
    assert AttemptTimeoutScanner(cbackend).tick() == len(timed)
    assert ExecutionDeadlineScanner(cbackend).tick() == len(late)
    assert _states(cbackend, timed + late) == {"expired"}


def test_a_bulk_cancel_and_replay_cover_every_partition(cbackend: Backend):
    c = Client(cbackend)
    eids = [str(r.execution_id) for r in c.create_many([{"kind": "batch", "lane": LANES[i % 8]} for i in range(120)])]
    got = bulk.collect(cbackend, listing.Query(kind="batch"), LANES)
    assert sorted(got.eids) == sorted(eids) and not got.capped
    job = bulk.start_job(cbackend, action="cancel", actor="ann", reason="cleanup", total=len(got.eids))
    bulk.run_job(cbackend, job, "cancel", got.eids, "cleanup")
    st = bulk.status(cbackend, job)
    assert st is not None and st.finished and (st.done, st.fields["ok"], st.fields["failed"]) == (120, "120", "0")
    assert _states(cbackend, eids) == {"cancelled"}
    job = bulk.start_job(cbackend, action="replay", actor="ann", reason="again", total=len(eids))
    bulk.run_job(cbackend, job, "replay", eids, "again")
    st = bulk.status(cbackend, job)
    assert st is not None and st.fields["ok"] == "120" and len(st.results) == 120
    assert _states(cbackend, eids) == {"waiting"}
