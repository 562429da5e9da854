"""A worker keeps working while one primary of a 3-primary + 3-replica Valkey Cluster is killed and restarted.

A real Worker runs in a thread; a submitter thread keeps creating executions on many lanes (so on all three
shards). The primary of slots 0-5460 is SIGKILLed mid-run, its replica takes over, the killed node is
started again and rejoins as a replica, submissions go on. Every execution accepted before, during or after
must complete exactly once, and the worker loop must never die.
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Any

import pytest
import redis
from redis.exceptions import AuthenticationError, ClusterDownError, MovedError, ResponseError, TryAgainError

from ffcore.backend import Backend
from ffcore.embedded import EmbeddedCluster, EmbeddedValkey, control_client, free_port
from ffcore.errors import ScriptError
from ffcore.execution.client import Client
from ffcore.failover import ClusterUnavailable, never_ran
from ffcore.ids import ExecutionId
from ffcore.keys import ExecKeys
from ffcore.partition import lane_partition
from ffcore.reads import decode_map, text
from ffcore.settings import Settings
from ffcore.worker.worker import Registry, Worker, WorkerConfig
from tests.bounded import join
from tests.cluster.conftest import KILLED, KILLED_REPLICA, KILLED_SLOTS
from tests.ffcore.invariants import check

LANES = tuple(f"fo-{i}" for i in range(24))
#: Bounds, not timings: each wait fails the test only when it is exceeded.
PHASE_BOUND_S = 20.0
DRAIN_BOUND_S = 30.0



class Submitter(threading.Thread):
    """Creates small batches on rotating lanes; a failed batch is resubmitted with the same execution ids
    (a create that did run answers DUPLICATE), so nothing is created twice and nothing is dropped."""

    def __init__(self, backend: Backend) -> None:
        super().__init__(name="submitter", daemon=True)
        self.client = Client(backend)
        self.partitions = backend.settings.partitions.flow
        self.accepted: dict[str, float] = {}  #: eid -> monotonic time its create was acknowledged
        self.errors: collections.Counter[str] = collections.Counter()  #: transport errors seen, by type
        self.resubmitted = 0
        self.unexpected: list[str] = []
        self.gave_up: list[str] = []
        self.stop_event = threading.Event()
        self._lane = 0

    def batch(self) -> list[dict[str, Any]]:
        specs = []
        for _ in range(6):
            lane = LANES[self._lane % len(LANES)]
            self._lane += 1
            eid = ExecutionId.mint(lane_partition(lane, self.partitions))
            specs.append({"kind": "job", "lane": lane, "payload": b"p", "execution_id": eid})
        return specs

    def run(self) -> None:
        while not self.stop_event.is_set():
            specs = self.batch()
            give_up_at = time.monotonic() + PHASE_BOUND_S
            while True:
                try:
                    created = self.client.create_many(specs)
                except (redis.ConnectionError, redis.TimeoutError) as e:
                    self.errors[type(e).__name__] += 1
                except ScriptError as e:
                    if e.code != "raised":  # a pipelined FCALL refused mid-failover (CLUSTERDOWN, TRYAGAIN...)
                        self.unexpected.append(repr(e))
                        return
                    self.errors["ScriptError(raised)"] += 1
                except Exception as e:  # anything else is a bug this test exists to find
                    self.unexpected.append(repr(e))
                    return
                else:
                    now = time.monotonic()
                    for r in created:
                        self.accepted[r.execution_id] = now
                    break
                if time.monotonic() > give_up_at:
                    self.gave_up += [s["execution_id"] for s in specs]
                    break
                self.resubmitted += 1
                time.sleep(0.1)
            time.sleep(0.05)


def _wait(what: str, ok: Any, bound_s: float = PHASE_BOUND_S) -> None:
    deadline = time.monotonic() + bound_s
    while not ok():
        assert time.monotonic() < deadline, f"not within {bound_s} s: {what}"
        time.sleep(0.05)


def _successes(backend: Backend, eid: str) -> int:
    """How many attempts of `eid` ended in success (the engine's record, not the handler's)."""
    k = ExecKeys(eid)
    attempts = int(text(backend.client.hget(k.core, "total_attempt_count")) or 0)
    states = [text(backend.client.hget(k.attempt(i), "attempt_state")) for i in range(attempts)]
    return states.count("ended_success")


def test_a_worker_keeps_working_while_a_primary_fails_over_and_rejoins(ha_cluster: EmbeddedCluster) -> None:
    settings = Settings.from_url(ha_cluster.url)
    backend = Backend.connect(settings)  # the submitter's and the checks' client
    wbackend = Backend.connect(settings)  # the worker's own client
    assert ha_cluster.role(KILLED) == "master"

    runs: list[tuple[str, int]] = []
    runs_lock = threading.Lock()
    registry = Registry()

    @registry.handler("job")
    def job(task: Any) -> bytes:
        with runs_lock:
            runs.append((task.execution_id, task.attempt_index))
        time.sleep(0.005)  # keeps a few tasks in flight when the primary dies
        return b"ok"

    worker = Worker(wbackend, WorkerConfig(lanes=LANES, concurrency=8, lease_ttl_ms=3_000, reclaim_interval_ms=1_000,
                                           heartbeat_interval_ms=1_000, drain_timeout_s=5.0), registry)
    crashed: list[BaseException] = []

    def run_worker() -> None:
        try:
            worker.run(install_signal_handlers=False)
        except BaseException as e:  # the loop must never end on its own
            crashed.append(e)

    worker_thread = threading.Thread(target=run_worker, name="worker", daemon=True)
    submitter = Submitter(backend)
    worker_thread.start()
    submitter.start()
    try:
        # Before: the cluster serves all three shards; the replica of the doomed primary has the library.
        _wait("60 completions before the kill", lambda: len(runs) >= 60)
        replica = control_client(ha_cluster.nodes[KILLED_REPLICA].port)
        assert replica.function_list("flowfabric"), "FUNCTION LOAD did not reach the replica"
        replica.close()

        # During: SIGKILL the primary; its replica takes the slots over.
        killed_at = time.monotonic()
        ha_cluster.kill(KILLED)
        ha_cluster.wait_healthy(PHASE_BOUND_S, replicas=0)
        failed_over_at = time.monotonic()
        assert ha_cluster.nodes[KILLED].port not in ha_cluster.primary_ports()

        # The killed node comes back on its port with its nodes.conf and rejoins as a replica.
        ha_cluster.restart(KILLED)
        ha_cluster.wait_healthy(PHASE_BOUND_S)
        assert ha_cluster.role(KILLED) == "slave"

        # After: submissions keep being served, the worker keeps completing them.
        done_at_rejoin = len(runs)
        _wait("60 more completions after the rejoin", lambda: len(runs) >= done_at_rejoin + 60)
        assert worker_thread.is_alive(), f"the worker loop ended: {crashed}"
    except BaseException:
        worker.stop()  # a failed phase must not leave the worker polling a cluster being torn down
        raise
    finally:
        submitter.stop_event.set()
        submitter.join(timeout=PHASE_BOUND_S + 5)

    assert not submitter.unexpected, submitter.unexpected
    assert not submitter.gave_up, f"{len(submitter.gave_up)} submissions never succeeded; errors {submitter.errors}"
    accepted = dict(submitter.accepted)
    c = Client(backend)

    def all_completed() -> bool:
        pipe = backend.client.pipeline(transaction=False)
        for eid in accepted:
            pipe.hget(ExecKeys(eid).core, "public_state")
        return all(text(s) == "completed" for s in pipe.execute())

    try:
        _wait("every accepted execution completed", all_completed, DRAIN_BOUND_S)
        assert worker_thread.is_alive(), f"the worker loop ended: {crashed}"
    finally:
        worker.stop()
    worker_thread.join(timeout=15)
    assert not worker_thread.is_alive() and not crashed, crashed

    # The killed shard really took part: created before the kill, and after its replica took over.
    on_killed = {e: at for e, at in accepted.items() if backend.client.keyslot(ExecKeys(e).core) in KILLED_SLOTS}
    assert any(at < killed_at for at in on_killed.values())
    assert any(at > failed_over_at for at in on_killed.values())

    ran = collections.Counter(runs)
    assert max(ran.values()) == 1, "one attempt was handed to the handler twice"
    per_eid = collections.Counter(e for e, _ in runs)
    for eid in accepted:
        check(backend, eid)
        assert c.get_result(eid) == b"ok"
        assert per_eid[eid] >= 1, f"{eid} completed without its handler running"
        assert _successes(backend, eid) == 1, f"{eid}: {decode_map(backend.client.hgetall(ExecKeys(eid).core))}"

    # The promoted replica (and every other primary) has the function library.
    for node in backend.client.get_primaries():
        assert backend.client.get_redis_connection(node).fcall("ff_version", 0) == b"6"

    # The failover was ridden out by retries, not by luck.
    assert backend.client.failover_retries + wbackend.client.failover_retries > 0
    reran = sum(1 for n in per_eid.values() if n > 1)
    print(f"\n{len(accepted)} executions; failover took {failed_over_at - killed_at:.1f} s; "
          f"submit errors {dict(submitter.errors)}, resubmitted {submitter.resubmitted}; "
          f"re-run after a lost reply or lease: {reran}; retries {backend.client.failover_retries}"
          f"+{wbackend.client.failover_retries}")
    backend.close()
    wbackend.close()


def test_a_refused_connection_proves_the_command_never_ran() -> None:
    client = control_client(free_port())  # nothing listens there
    with pytest.raises(redis.ConnectionError) as refused:
        client.set("x", "1")
    assert never_ran(refused.value) is True


def test_a_connection_dropped_after_the_send_may_have_run(valkey_server: EmbeddedValkey) -> None:
    blocked = control_client(valkey_server.port)
    killer = control_client(valkey_server.port)
    victim = blocked.client_id()

    def kill_once_blocked() -> None:
        _wait("BLMOVE blocks", lambda: any(c["id"] == str(victim) and c["cmd"] == "blmove"
                                           for c in killer.client_list()))
        killer.client_kill_filter(_id=victim)

    t = threading.Thread(target=kill_once_blocked, daemon=True)
    t.start()
    with pytest.raises(redis.ConnectionError) as dropped:
        blocked.blmove("failover-test:src", "failover-test:dst", 0)  # a write, in the server's hands
    join(t)
    assert never_ran(dropped.value) is False
    killer.close()


def test_refusals_count_as_never_ran_and_other_errors_are_not_failover_errors() -> None:
    for refused in (ClusterDownError("CLUSTERDOWN The cluster is down"), TryAgainError("TRYAGAIN"),
                    MovedError("3999 127.0.0.1:6381"), redis.BusyLoadingError("LOADING")):
        assert never_ran(refused) is True, refused
    for final in (ResponseError("WRONGTYPE"), AuthenticationError("WRONGPASS"), ClusterUnavailable("gave up")):
        assert never_ran(final) is None, final
