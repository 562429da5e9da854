"""A plain create's side writes ride inside ff_create_fast (issue #21): its listing entry is scored with the
server's created_at, and a batch announces itself once per lane — one call per create, nothing beside it
but the lane registry."""

from __future__ import annotations

import time

from ffcore import keys, wake
from ffcore.execution.client import Client
from ffcore.ids import ExecutionId
from ffcore.keys import ExecKeys, PartitionKeys
from tests.pubsub_support import confirmed_pubsub


def test_the_listing_entry_carries_the_server_created_at(backend):
    eids = [r.execution_id for r in Client(backend).create_many([{"kind": "k", "lane": "sw"} for _ in range(3)])]
    for e in eids:
        created_at = int(backend.client.hget(ExecKeys(e).core, "created_at"))
        score = backend.client.zscore(PartitionKeys(ExecutionId(e).partition_index).created, e)
        assert score == created_at


def test_a_batch_wakes_each_lane_once(backend):
    ps = confirmed_pubsub(backend.client, keys.lane_wake("sa"), keys.lane_wake("sb"))
    try:
        out = Client(backend).create_many([{"kind": "k", "lane": "sa"} for _ in range(5)]
                                          + [{"kind": "k", "lane": "sb"} for _ in range(3)])
        got: list[tuple[str, list[int]]] = []
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            m = ps.get_message(timeout=0.1)
            if m is not None:
                got.append((m["channel"].decode(), wake.parse(m["data"])))
    finally:
        ps.close()
    parts = {lane: {ExecutionId(r.execution_id).partition_index for r in out[i:j]}
             for lane, i, j in (("sa", 0, 5), ("sb", 5, 8))}
    assert sorted(got) == sorted([(keys.lane_wake("sa"), sorted(parts["sa"])),
                                  (keys.lane_wake("sb"), sorted(parts["sb"]))])


def test_a_delayed_create_is_listed_but_wakes_nobody(backend):
    ps = confirmed_pubsub(backend.client, keys.lane_wake("sd"))
    try:
        r = Client(backend).create(kind="k", lane="sd", delay_until=int(time.time() * 1000) + 60_000)
        assert ps.get_message(timeout=0.5) is None
    finally:
        ps.close()
    assert backend.client.zscore(PartitionKeys(ExecutionId(r.execution_id).partition_index).created,
                                 r.execution_id) is not None
