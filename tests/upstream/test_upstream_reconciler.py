"""The upstream-mode reconciler (ffcore/upstream/reconcile.py): our `ff:up:` listing indexes follow upstream's
sets — new executions appear newest first, purged ones leave — cheaply when nothing changed, and changes are
announced on `ff:events` for live pages."""

from __future__ import annotations

import json
import time

import pytest

from ffcore import events, keys
from ffcore.execution import listing
from ffcore.execution.client import Client
from ffcore.ids import ExecutionId
from ffcore.keys import ExecKeys, PartitionKeys
from ffcore.upstream.reconcile import PER_PARTITION, Reconciler
from tests import upstream_scenario


def _listed(backend) -> list[str]:
    return [r["execution_id"] for r in listing.list_executions(backend, listing.Query(limit=100),
                                                               Client(backend).lanes()).rows]


def test_executions_created_after_a_pass_list_first_and_a_purged_one_leaves(made, up_backend, raw):
    r = Reconciler(up_backend)
    r.tick()
    first = _listed(up_backend)
    assert sorted(first) == sorted(made.executions())
    new = []
    for n in (4, 1):  # one on a partition that had none
        time.sleep(0.003)
        new.append(upstream_scenario.create(raw, ExecutionId.mint(n), kind="late"))
    r.tick()
    assert _listed(up_backend)[:2] == new[::-1]
    # Upstream's retention purges an execution: its records and its all_executions entry go.
    gone = made.solo[0]
    raw.delete(ExecKeys(gone).core)
    raw.srem(PartitionKeys(ExecKeys(gone).eid.partition_index).all_executions, gone)
    r.tick()
    assert gone not in _listed(up_backend)
    assert raw.zscore(keys.up_created(1), gone) is None


def test_nothing_of_upstream_is_written_and_an_idle_tick_costs_one_pipeline(made, up_backend, raw):
    # A purge that left an id behind in all_executions (no record to index): it must not keep its partition
    # walked on every tick.
    raw.sadd(PartitionKeys(1).all_executions, str(ExecutionId.mint(1)))
    r = Reconciler(up_backend)
    theirs = set(raw.keys("*"))
    r.tick()
    written = set(raw.keys("*")) - theirs
    assert written and all(k.startswith(b"ff:up:") for k in written)
    events.flush_all()  # the first pass's hint goes out now, not inside the measured window
    before = int(raw.info("stats")["total_commands_processed"])
    assert r.tick() == 0  # not a sweep tick and nothing changed
    spent = int(raw.info("stats")["total_commands_processed"]) - before - 1  # minus INFO itself
    assert spent <= PER_PARTITION * up_backend.settings.partitions.flow


def test_a_signal_upstream_delivers_is_announced_for_live_pages(made, up_backend, raw):
    r = Reconciler(up_backend)
    r.tick()
    sub = raw.pubsub()
    sub.subscribe(keys.EVENTS_CHANNEL)
    assert sub.get_message(timeout=2)["type"] == "subscribe"
    upstream_scenario.signal(raw, made, "approve")
    r.tick()
    events.flush_all()
    deadline = time.monotonic() + 5
    got: list[dict] = []
    while time.monotonic() < deadline and not any(made.suspended in g.get("ids", []) for g in got):
        msg = sub.get_message(timeout=0.5)
        if msg and msg["type"] == "message":
            got.append(json.loads(msg["data"]))
    sub.close()
    assert any(made.suspended in g.get("ids", []) for g in got), got


@pytest.mark.parametrize("filters", [{"kind": "step-d"}, {"state": "waiting_children"}, {"lane": "default"}])
def test_the_list_filters_work_on_the_reconciled_index(reconciled, up_backend, filters):
    rows = listing.list_executions(up_backend, listing.Query(**filters), Client(up_backend).lanes()).rows
    assert [r["execution_id"] for r in rows if r["execution_id"] == reconciled.members["d"]]
    if "kind" in filters:
        assert len(rows) == 1
