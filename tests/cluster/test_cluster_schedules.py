"""Recurring schedules (#26) on the local 3-primary Valkey Cluster: schedules on lanes spread over every primary fire
once per fire time (catch-up, racing scanners, overlap skip), each fire one FCALL in its lane's slot; pause, trigger
and delete work there too."""

from __future__ import annotations

import threading

from ffcore.backend import Backend
from ffcore.engine.schedule_scanner import ScheduleScanner
from ffcore.execution.client import Client
from ffcore.ids import ExecutionId
from ffcore.keys import PartitionKeys, SchedKeys
from ffcore.partition import lane_partition
from tests.bounded import join

LANES = tuple(f"sch-lane-{i}" for i in range(6))


def lanes_on_every_primary(backend: Backend, per_node: int = 2) -> list[str]:
    """Lanes whose partitions (so their schedules) live on each of the primaries, `per_node` each."""
    picked: dict[str, list[str]] = {}
    for i in range(400):
        lane = f"sch-lane-{i}"
        key = SchedKeys(lane_partition(lane, backend.settings.partitions.flow), "x").definition
        node = backend.client.get_node_from_key(key).name
        if len(picked.setdefault(node, [])) < per_node:
            picked[node].append(lane)
    return [lane for lanes in picked.values() for lane in lanes]


def test_schedules_on_every_primary_fire_each_time_once(cbackend: Backend):
    client = Client(cbackend)
    lanes = lanes_on_every_primary(cbackend)
    made = [client.schedules.create(name=f"c{i}", kind="job", lane=lane, interval_ms=1000, catchup=3)
            for i, lane in enumerate(lanes)]
    nodes = {cbackend.client.get_node_from_key(SchedKeys(s.partition, s.id).definition).name for s in made}
    assert len(made) == 6 and len(nodes) == 3  # the schedules live on all three primaries
    now = max(s.spec.anchor_ms for s in made) + 5_500
    # Two scanners race for the same fire times: each time fires once.
    counts: list[int] = []
    threads = [threading.Thread(target=lambda: counts.append(ScheduleScanner(cbackend).tick(now_ms=now)), daemon=True)
               for _ in range(2)]
    for t in threads:
        t.start()
    join(threads)
    assert sum(counts) == 4 * len(made)  # 3 of the 4 missed (catch-up limit) + the one on time, per schedule
    for s in made:
        runs = client.schedules.runs(s.id, 50)
        fired = sorted(r.fire_at - s.spec.anchor_ms for r in runs if r.outcome == "fired")
        assert fired == [2000, 3000, 4000, 5000] and [r.missed for r in runs if r.outcome == "missed"] == [1]
        eids = {r.execution_id for r in runs if r.execution_id}
        assert all(ExecutionId(e).partition_index == s.partition for e in eids)
        assert eids <= {x.decode() for x in cbackend.client.smembers(PartitionKeys(s.partition).all_executions)}
    assert ScheduleScanner(cbackend).tick(now_ms=now) == 0


def test_overlap_skip_pause_trigger_and_delete_on_the_cluster(cbackend: Backend):
    client = Client(cbackend)
    s = client.schedules.create(name="skipper", kind="job", lane=LANES[1], interval_ms=1000, overlap="skip")
    scanner = ScheduleScanner(cbackend)
    assert scanner.tick(now_ms=s.next_fire_at) == 1
    assert scanner.tick(now_ms=s.next_fire_at + 1000) == 0  # the first run is still waiting: skipped
    assert [r.outcome for r in client.schedules.runs(s.id)] == ["skipped", "fired"]
    client.schedules.pause(s.id)
    assert scanner.tick(now_ms=s.next_fire_at + 5000) == 0
    eid = client.schedules.trigger(s.id)
    assert client.get_state(eid) == "waiting"
    client.schedules.delete(s.id)
    assert client.schedules.get(s.id) is None and client.schedules.list() == []


def test_a_europe_paris_cron_fires_at_its_zone_s_instants_on_the_cluster(cbackend: Backend):
    client = Client(cbackend)
    s = client.schedules.create(name="paris", kind="job", lane=LANES[2], cron="30 2 * * *", timezone="Europe/Paris")
    first, second = s.spec.upcoming(s.created_at, 2)
    assert s.next_fire_at == first
    assert ScheduleScanner(cbackend).tick(now_ms=first) == 1
    assert client.schedules.get(s.id).next_fire_at == second
    assert [r.fire_at for r in client.schedules.runs(s.id)] == [first]
