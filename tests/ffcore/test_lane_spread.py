"""A lane spread over K partitions (issue #23): creates go round-robin over the lane's K partitions, a create
with an idempotency key always to the same one, workers claim from all of them, bad settings are refused."""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

import pytest

from ffcore import keys, lane_spread
from ffcore.errors import InvalidInput
from ffcore.execution.client import Client
from ffcore.partition import crc16, lane_partition, spread_partitions
from ffcore.worker.worker import Registry, Worker, WorkerConfig


def test_spread_partitions_start_at_home_and_spread_their_slots_evenly():
    parts = spread_partitions("hot", 4, 256)
    assert parts[0] == lane_partition("hot", 256)
    assert len(set(parts)) == 4
    # Their slots are spread around the slot space: each gap at least 0.8 of an even share.
    for k in (2, 3, 4, 8):
        slots = sorted(crc16(f"fp:{n}".encode()) % 16384 for n in spread_partitions("hot", k, 256))
        gaps = [(slots[(i + 1) % k] - slots[i]) % 16384 for i in range(k)]
        assert min(gaps) >= 0.8 * 16384 / k, (k, gaps)
    with pytest.raises(ValueError):
        spread_partitions("hot", 0, 256)


@pytest.mark.parametrize("bad", [0, -1, 65, "3", True, 2.5])
def test_a_bad_spread_is_refused_and_nothing_is_written(backend, bad):
    with pytest.raises(InvalidInput, match="spread"):
        lane_spread.set_spread(backend, "hot", bad)
    assert not backend.client.exists(keys.lane_config("hot"))


def test_creates_spread_round_robin_and_a_keyed_retry_lands_where_the_first_did(backend):
    parts = lane_spread.set_spread(backend, "hot", 3)
    c = Client(backend)
    made = [c.create(kind="k", lane="hot") for _ in range(30)]
    assert Counter(r.execution_id.partition_index for r in made) == dict.fromkeys(parts, 10)
    assert {int(p) for p in backend.client.smembers(keys.lane_partitions("hot"))} == set(parts)
    first = c.create(kind="k", lane="hot", idempotency_key="order-42")
    again = Client(backend).create(kind="k", lane="hot", idempotency_key="order-42")
    assert again.execution_id == first.execution_id
    assert again.duplicate and not first.duplicate
    # Back to one partition: new creates go home again (after the producer's cache of the setting).
    lane_spread.set_spread(backend, "hot", 1)
    assert not backend.client.hexists(keys.lane_config("hot"), lane_spread.FIELD)
    assert Client(backend).create(kind="k", lane="hot").execution_id.partition_index == lane_partition(
        "hot", backend.settings.partitions.flow)


def test_a_worker_runs_every_task_of_a_spread_lane(backend):
    lane_spread.set_spread(backend, "wide", 4)
    made = Client(backend).create_many([{"kind": "k", "lane": "wide", "payload": b""} for _ in range(40)])
    assert len({r.execution_id.partition_index for r in made}) == 4
    ran: list[str] = []
    reg = Registry()

    @reg.handler("*")
    def body(task: Any) -> None:
        ran.append(str(task.execution_id))

    w = Worker(backend, WorkerConfig(lanes=("wide",), concurrency=8, poll_interval_ms=50), reg)
    th = threading.Thread(target=w.run, kwargs={"install_signal_handlers": False}, daemon=True)
    th.start()
    try:
        deadline = time.monotonic() + 15
        while len(ran) < 40 and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        w.stop()
        th.join(5)
    assert sorted(ran) == sorted(str(r.execution_id) for r in made)
