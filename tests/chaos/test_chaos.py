"""Chaos: worker processes SIGKILLed at random and restarted, Valkey restarted once mid-run (AOF everysec) —
a single server, and one primary of a local 3-primary Valkey Cluster.

Afterwards no execution is lost, none completed twice (exactly one successful attempt, fenced by lease
epochs), all are terminal soon after the last fault, and no process died of the outage (the scanners and
every worker not killed on purpose still run). CI runs 1,000 executions; `FF_CHAOS_N=10000` runs the
full size (`pytest tests/chaos -m slow` with the env var).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Protocol

from ffcore.backend import Backend
from ffcore.embedded import EmbeddedCluster, EmbeddedValkey, control_client
from ffcore.execution.client import Client
from ffcore.keys import ExecKeys
from ffcore.reads import decode_map, text
from ffcore.settings import Settings
from tests.conftest import REPO

N = int(os.environ.get("FF_CHAOS_N", "1000"))
WORKERS = 4
LEASE_TTL_MS = 1500
KILL_EVERY_S = 2.0
HMAC_SECRET = "5ec7e7" * 8


class Valkey(Protocol):
    """What the chaos run needs of the server it shakes."""

    url: str

    def ports(self) -> list[int]: ...

    def restart(self) -> None: ...

    def stop(self) -> None: ...


class SingleValkey:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.server = EmbeddedValkey(data_dir, persistent=True).start()
        self.url = self.server.url

    def ports(self) -> list[int]:
        return [self.server.port]

    def restart(self) -> None:
        """Same port and data dir; every client must reconnect."""
        self.server.stop()
        time.sleep(0.5)
        self.server = EmbeddedValkey(self.data_dir, persistent=True, port=self.server.port).start()

    def stop(self) -> None:
        self.server.stop()


class LocalCluster:
    """Three primaries without replicas, on AOF: the restarted primary comes back with its slots and data."""

    RESTARTED = 0  #: the primary of slots 0-5460

    def __init__(self, data_dir: Path) -> None:
        self.cluster = EmbeddedCluster(data_dir)
        for node in self.cluster.nodes:
            node.persistent = True  # (EmbeddedCluster turns AOF on only with replicas)
        self.cluster.start()
        self.url = self.cluster.url

    def ports(self) -> list[int]:
        return [n.port for n in self.cluster.nodes]

    def restart(self) -> None:
        """Its slots answer nothing (then CLUSTERDOWN) until it is back; every client must ride that out."""
        self.cluster.nodes[self.RESTARTED].stop()
        time.sleep(0.5)
        self.cluster.restart(self.RESTARTED)
        self.cluster.wait_healthy()

    def stop(self) -> None:
        self.cluster.stop()


class Fleet:
    """The worker processes and one scanners process, all against `url`, logging under `tmp`."""

    def __init__(self, url: str, tmp: Path) -> None:
        self.url, self.tmp = url, tmp
        #: Where each worker's current process starts in its log.
        self.log_from: dict[int, int] = {}
        self.workers = {i: self._worker(i) for i in range(WORKERS)}
        self.scanners = self._start("scanners", ["ffscanners"], FF_SCAN_LEASE_EXPIRY_MS="300", FF_SCAN_DELAYED_MS="200")
        self.kills = 0

    def _start(self, name: str, args: list[str], **env: str) -> subprocess.Popen[bytes]:
        full = {**os.environ, "FF_VALKEY_URL": self.url, "FF_WAITPOINT_HMAC_SECRET": HMAC_SECRET,
                "DJANGO_SECRET_KEY": "chaos", "FF_DATA_DIR": str(self.tmp), **env}
        log = open(self.tmp / f"{name}.log", "ab")  # noqa: SIM115 - closed with the process
        return subprocess.Popen([sys.executable, "manage.py", *args], cwd=REPO, env=full, stdout=log,
                                stderr=subprocess.STDOUT)

    def _worker(self, i: int) -> subprocess.Popen[bytes]:
        log = self.tmp / f"worker{i}.log"
        self.log_from[i] = log.stat().st_size if log.exists() else 0
        return self._start(f"worker{i}", ["ffworker", "--module", "tests.worker_handlers", "--lanes", "chaos",
                                          "--concurrency", "8", "--lease-ttl-ms", str(LEASE_TTL_MS),
                                          "--worker-id", f"chaos-{i}", "--drain-timeout", "2"])

    def kill_one(self, rng: random.Random) -> None:
        victim = rng.randrange(WORKERS)
        self.workers[victim].send_signal(signal.SIGKILL)
        self.workers[victim].wait()
        self.workers[victim] = self._worker(victim)
        self.kills += 1

    def wait_started(self, timeout_s: float = 30.0) -> None:
        """Until every current worker is connected (a worker starting during the restart could not connect
        and would exit: a start-up check, not what this test is about)."""
        deadline = time.monotonic() + timeout_s
        for i in self.workers:
            log = self.tmp / f"worker{i}.log"
            while " · lanes ".encode() not in log.read_bytes()[self.log_from[i]:]:  # ffworker's start line
                assert time.monotonic() < deadline, f"worker{i} did not start"
                time.sleep(0.05)

    def dead(self) -> list[str]:
        """Processes that exited on their own (none should: they ride out every fault)."""
        procs = {f"worker{i}": p for i, p in self.workers.items()} | {"scanners": self.scanners}
        return [f"{name}: {(self.tmp / f'{name}.log').read_text(errors='replace')[-600:]}"
                for name, p in procs.items() if p.poll() is not None]

    def stop(self) -> None:
        for p in [*self.workers.values(), self.scanners]:
            if p.poll() is None:
                p.kill()
            p.wait()


def _done(backend: Backend, eids: list[str]) -> int:
    pipe = backend.client.pipeline(transaction=False)
    for e in eids:
        pipe.hget(ExecKeys(e).core, "lifecycle_phase")
    return sum(1 for v in pipe.execute() if text(v) == "terminal")


def _safe_done(backend: Backend, eids: list[str]) -> int:
    for _ in range(50):
        try:
            return _done(backend, eids)
        except Exception:
            time.sleep(0.2)
    raise AssertionError("Valkey did not come back")


def _run_chaos(valkey: Valkey, tmp: Path) -> None:
    """N executions through a fleet whose workers are killed every ~KILL_EVERY_S and whose Valkey restarts
    once a third is done; then the assertions of the module docstring."""
    rng = random.Random(7)
    backend = Backend.connect(Settings.from_url(valkey.url))
    fleet: Fleet | None = None
    try:
        c = Client(backend)
        eids: list[str] = []
        for start in range(0, N, 500):
            specs = [{"kind": "count", "lane": "chaos", "payload": b'{"sleep_ms": 300}'}
                     for _ in range(start, min(N, start + 500))]
            eids += [r.execution_id for r in c.create_many(specs)]
        for port in valkey.ports():  # a short AOF to load at the restart
            with control_client(port) as node:
                node.bgrewriteaof()
        fleet = Fleet(valkey.url, tmp)
        restarted = False
        last_fault = time.monotonic()
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            done = _safe_done(backend, eids)
            if done == N:
                break
            time.sleep(KILL_EVERY_S * rng.uniform(0.5, 1.5))
            if not restarted and done >= N // 3:
                fleet.wait_started()
                valkey.restart()
                restarted = True
            else:
                fleet.kill_one(rng)
            last_fault = time.monotonic()
        finished_at = time.monotonic()
        assert restarted and fleet.kills >= 3
        assert _safe_done(backend, eids) == N, "executions were lost or stuck"
        # All terminal within lease TTL + scanner/reclaim intervals (+ restart slack) after the last fault.
        assert finished_at - last_fault < LEASE_TTL_MS / 1000 + 15
        assert fleet.dead() == []
        # Exactly one successful attempt each; the lease epoch fences every reclaimed attempt.
        pipe = backend.client.pipeline(transaction=False)
        for e in eids:
            pipe.hgetall(ExecKeys(e).core)
        cores = [decode_map(x) for x in pipe.execute()]
        assert {x["public_state"] for x in cores} == {"completed"}
        pipe = backend.client.pipeline(transaction=False)
        for e, x in zip(eids, cores, strict=True):
            for i in range(int(x["total_attempt_count"])):
                pipe.hmget(ExecKeys(e).attempt(i), ["attempt_state", "lease_epoch"])
        attempts = iter(pipe.execute())
        reclaimed = 0
        for x in cores:
            rows = [next(attempts) for _ in range(int(x["total_attempt_count"]))]
            states = [text(s) for s, _ in rows]
            assert states.count("ended_success") == 1, (x["execution_id"], states)
            epochs = [int(text(ep)) for _, ep in rows]
            assert epochs == sorted(epochs) and len(set(epochs)) == len(epochs)
            reclaimed += len(rows) > 1
        assert reclaimed >= 1  # the kills really interrupted work
    finally:
        if fleet is not None:
            fleet.stop()
        backend.close()
        valkey.stop()


def test_no_execution_is_lost_or_completed_twice_under_kills_and_a_valkey_restart(tmp_path: Path):
    _run_chaos(SingleValkey(tmp_path / "valkey"), tmp_path)


def test_no_execution_is_lost_or_completed_twice_under_kills_and_a_primary_restart_on_a_cluster(tmp_path: Path):
    _run_chaos(LocalCluster(tmp_path / "cluster"), tmp_path)
