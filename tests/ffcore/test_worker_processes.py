"""Real worker processes (`manage.py ffworker`) against the real Valkey: crash + reclaim, racing workers,
graceful SIGTERM drain, and the live-worker registry."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ffcore import functions as F
from ffcore.backend import Backend
from ffcore.execution.client import Client
from ffcore.keys import ExecKeys
from ffcore.partition import lane_partition
from ffcore.reads import text
from ffcore.worker.heartbeat import WorkerInfo
from ffcore.worker.worker import Worker, WorkerConfig
from ffcore.workers import list_workers
from tests.conftest import REPO
from tests.worker_handlers import handled_key, release_key

HANDLERS = "tests.worker_handlers"


class Proc:
    def __init__(self, popen: subprocess.Popen[bytes], log: Path) -> None:
        self.popen = popen
        self.log = log

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture
def start_worker(backend: Backend, tmp_path: Path) -> Iterator[Callable[..., Proc]]:
    """Start `manage.py ffworker --module tests.worker_handlers <args>`; every process is killed at teardown."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FF_")}
    env.update({"FF_VALKEY_URL": backend.url, "DJANGO_SECRET_KEY": "test", "FF_DATA_DIR": str(tmp_path)})
    procs: list[Proc] = []

    def start(*args: str) -> Proc:
        log = tmp_path / f"worker-{len(procs)}.log"
        with log.open("wb") as out:
            popen = subprocess.Popen([sys.executable, "manage.py", "ffworker", "--module", HANDLERS, *args],
                                     cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
        procs.append(Proc(popen, log))
        return procs[-1]

    yield start
    for p in procs:
        if p.popen.poll() is None:
            p.popen.kill()
        p.popen.wait(timeout=10)


def wait_for(what: str, check: Callable[[], Any], timeout_s: float = 20.0, procs: tuple[Proc, ...] = ()) -> Any:
    """Poll `check` until it returns something truthy; fail with the workers' output after the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            logs = "\n".join(f"--- worker log ---\n{p.output()}" for p in procs)
            raise AssertionError(f"timed out waiting for {what}\n{logs}")
        time.sleep(0.05)


def core(backend: Backend, eid: str) -> dict[str, str]:
    return {text(k): text(v) for k, v in backend.client.hgetall(ExecKeys(eid).core).items()}


def worker_named(backend: Backend, worker_id: str) -> WorkerInfo | None:
    return next((w for w in list_workers(backend) if w.fields.get("worker_id") == worker_id), None)


def handled(backend: Backend, eid: str) -> int:
    return int(backend.client.get(handled_key(eid)) or 0)


def test_a_killed_workers_execution_is_reclaimed_and_completed_by_another_worker(backend, start_worker):
    a = start_worker("--worker-id", "wk-a", "--lease-ttl-ms", "1000", "--concurrency", "1")
    eid = Client(backend).create(kind="hold").execution_id
    running = wait_for("wk-a to hold the execution",
                       lambda: (c := core(backend, eid))["current_worker_id"] == "wk-a" and c, procs=(a,))
    assert running["public_state"] == "active"
    epoch = int(running["current_lease_epoch"])

    a.popen.send_signal(signal.SIGKILL)
    assert a.popen.wait(timeout=10) == -signal.SIGKILL
    backend.client.set(release_key(eid), "1")
    b = start_worker("--worker-id", "wk-b", "--lease-ttl-ms", "1000")
    wait_for("the execution to complete", lambda: core(backend, eid)["public_state"] == "completed", procs=(b,))

    ex = Client(backend).get_execution(eid)
    assert ex is not None
    first, second = (attempt.fields for attempt in ex.attempts)
    assert (first["attempt_state"], first["worker_id"]) == ("interrupted_reclaimed", "wk-a")
    assert (second["attempt_type"], second["attempt_state"]) == ("reclaim", "ended_success")
    assert second["worker_id"] == "wk-b"
    assert int(second["lease_epoch"]) == epoch + 1
    assert ex["lease_reclaim_count"] == "1"
    assert handled(backend, eid) == 1


def test_two_racing_workers_complete_every_execution_exactly_once(backend, start_worker):
    # Two replicas of the same command share the default worker id (grants are bound to it), as in production.
    workers = (start_worker("--concurrency", "8"), start_worker("--concurrency", "8"))
    wait_for("both workers to register", lambda: len(list_workers(backend)) == 2, procs=workers)
    client = Client(backend)
    eids = [r.execution_id for r in client.create_many([{"kind": "count", "payload": '{"sleep_ms": 10}'}] * 200)]

    def all_completed() -> bool:
        pipe = backend.client.pipeline(transaction=False)
        for e in eids:
            pipe.hget(ExecKeys(e).core, "public_state")
        return all(text(s) == "completed" for s in pipe.execute())

    wait_for("all 200 executions to complete", all_completed, timeout_s=30, procs=workers)
    by_worker: dict[str, int] = {}
    for e in eids:
        ex = client.get_execution(e)
        assert ex is not None
        assert [(a.fields["attempt_state"]) for a in ex.attempts] == ["ended_success"], e
        assert handled(backend, e) == 1, e
        w = ex.attempts[0].fields["worker_instance_id"]
        by_worker[w] = by_worker.get(w, 0) + 1
    # Both really raced for the same queue (one lane = one partition) and neither starved.
    assert set(by_worker) == {w.worker_instance_id for w in list_workers(backend)}, by_worker


def test_sigterm_finishes_the_in_flight_task_then_exits_and_unregisters(backend, start_worker):
    w = start_worker("--worker-id", "wk-term")
    info = wait_for("the worker to register", lambda: worker_named(backend, "wk-term"), procs=(w,))
    eid = Client(backend).create(kind="hold").execution_id
    wait_for("the worker to hold the execution",
             lambda: core(backend, eid)["current_worker_id"] == "wk-term", procs=(w,))

    w.popen.send_signal(signal.SIGTERM)
    backend.client.set(release_key(eid), "1")
    assert w.popen.wait(timeout=30) == 0, w.output()

    ex = Client(backend).get_execution(eid)
    assert ex is not None and ex["public_state"] == "completed"
    assert [(a.fields["attempt_state"], a.fields["worker_id"]) for a in ex.attempts] == [("ended_success", "wk-term")]
    assert handled(backend, eid) == 1
    assert info.worker_instance_id not in {x.worker_instance_id for x in list_workers(backend)}


def test_the_registry_shows_a_running_worker_with_lanes_capabilities_and_leases(backend, start_worker):
    w = start_worker("--worker-id", "wk-reg", "--lanes", "lane-a,lane-b", "--capabilities", "gpu,cuda",
                     "--concurrency", "3")
    eid = Client(backend).create(kind="hold", lane="lane-b").execution_id
    info = wait_for("the registry to list the worker's lease",
                    lambda: (x := worker_named(backend, "wk-reg")) and eid in x.leases and x, procs=(w,))

    assert info.lanes == ["lane-a", "lane-b"]
    assert info.capabilities == ["cuda", "gpu"]
    assert info.in_flight == 1
    assert info.fields["concurrency"] == "3"
    assert info.fields["pid"] == str(w.popen.pid)

    backend.client.set(release_key(eid), "1")
    wait_for("the execution to complete", lambda: core(backend, eid)["public_state"] == "completed", procs=(w,))
    w.popen.send_signal(signal.SIGTERM)
    assert w.popen.wait(timeout=30) == 0, w.output()


def test_a_claim_takes_no_more_leases_than_the_tasks_it_returns(backend):
    # Regression: heads from several lanes used to be claimed beyond `n` and the surplus dropped, leaving
    # leases nobody renewed or ran (reclaimed a lease TTL later as a second attempt).
    client = Client(backend)
    client.create_many([{"kind": "count", "lane": lane} for lane in ("l1", "l2", "l3") for _ in range(3)])
    worker = Worker(backend, WorkerConfig(lanes=("l1", "l2", "l3"), concurrency=2))

    tasks = worker.claim_next(2)

    active = sum(len(client.list_executions(lane_partition(lane, client.partitions), lane, "active").rows)
                 for lane in ("l1", "l2", "l3"))
    assert 1 <= len(tasks) <= 2
    assert active == len(tasks)


def test_a_claim_that_consumed_a_peers_grant_still_returns_the_task(backend):
    # Regression: processes sharing a worker_id can consume each other's grants (the grant is bound to the
    # worker_id); a successful claim whose own grant call failed used to be dropped with its lease held.
    eid = Client(backend).create(kind="count").execution_id
    backend.call(F.issue_claim_grant(ExecKeys(eid), lane="default", worker_id="worker", worker_instance_id="peer",
                                     grant_ttl_ms=5000, capabilities_csv=""))
    worker = Worker(backend, WorkerConfig(worker_id="worker"))

    tasks = worker.claim_next(1)

    assert [t.execution_id for t in tasks] == [eid]
    assert core(backend, eid)["current_worker_instance_id"] == worker.config.worker_instance_id
