"""Chaos: worker processes SIGKILLed at random and restarted, Valkey restarted once mid-run (AOF everysec).

Afterwards no execution is lost, none completed twice (exactly one successful attempt, fenced by lease
epochs), and all are terminal soon after the last fault. CI runs 1,000 executions; `FF_CHAOS_N=10000`
runs the full size (`pytest tests/chaos -m slow` with the env var).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from ffcore.backend import Backend
from ffcore.client import Client
from ffcore.embedded import EmbeddedValkey
from ffcore.keys import ExecKeys
from ffcore.reads import decode_map, text
from ffcore.settings import Settings
from tests.conftest import REPO

N = int(os.environ.get("FF_CHAOS_N", "1000"))
WORKERS = 4
LEASE_TTL_MS = 1500
KILL_EVERY_S = 2.0


def _worker(url: str, tmp: Path, i: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "FF_VALKEY_URL": url, "DJANGO_SECRET_KEY": "chaos", "FF_DATA_DIR": str(tmp)}
    log = open(tmp / f"worker{i}.log", "ab")  # noqa: SIM115 - closed with the process
    return subprocess.Popen([sys.executable, "manage.py", "ffworker", "--module", "tests.worker_handlers",
                             "--lanes", "chaos", "--concurrency", "8", "--lease-ttl-ms", str(LEASE_TTL_MS),
                             "--worker-id", f"chaos-{i}", "--drain-timeout", "2"],
                            cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)


def _scanners(url: str, tmp: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "FF_VALKEY_URL": url, "DJANGO_SECRET_KEY": "chaos", "FF_DATA_DIR": str(tmp),
           "FF_SCAN_LEASE_EXPIRY_MS": "300", "FF_SCAN_DELAYED_MS": "200"}
    log = open(tmp / "scanners.log", "ab")  # noqa: SIM115
    return subprocess.Popen([sys.executable, "manage.py", "ffscanners"], cwd=REPO, env=env, stdout=log,
                            stderr=subprocess.STDOUT)


def _done(backend: Backend, eids: list[str]) -> int:
    pipe = backend.client.pipeline(transaction=False)
    for e in eids:
        pipe.hget(ExecKeys(e).core, "lifecycle_phase")
    return sum(1 for v in pipe.execute() if text(v) == "terminal")


def test_no_execution_is_lost_or_completed_twice_under_kills_and_a_valkey_restart(tmp_path: Path):
    rng = random.Random(7)
    server = EmbeddedValkey(tmp_path / "valkey", persistent=True).start()
    url = server.url
    backend = Backend.connect(Settings.from_url(url))
    procs: dict[int, subprocess.Popen[bytes]] = {}
    scanners = None
    try:
        c = Client(backend)
        eids: list[str] = []
        for start in range(0, N, 500):
            specs = [{"kind": "count", "lane": "chaos", "payload": b'{"sleep_ms": 300}'}
                     for _ in range(start, min(N, start + 500))]
            eids += [r.execution_id for r in c.create_many(specs)]
        backend.client.execute_command("BGREWRITEAOF")
        procs = {i: _worker(url, tmp_path, i) for i in range(WORKERS)}
        scanners = _scanners(url, tmp_path)
        restarted = False
        kills = 0
        last_fault = time.monotonic()
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            done = _safe_done(backend, eids)
            if done == N:
                break
            time.sleep(KILL_EVERY_S * rng.uniform(0.5, 1.5))
            if not restarted and done >= N // 3:
                # Restart Valkey on the same port and data dir; every client must reconnect.
                server.stop()
                time.sleep(0.5)
                server = EmbeddedValkey(tmp_path / "valkey", persistent=True, port=server.port).start()
                restarted = True
                last_fault = time.monotonic()
                continue
            victim = rng.randrange(WORKERS)
            procs[victim].send_signal(signal.SIGKILL)
            procs[victim].wait()
            procs[victim] = _worker(url, tmp_path, victim)
            kills += 1
            last_fault = time.monotonic()
        finished_at = time.monotonic()
        assert restarted and kills >= 3
        assert _safe_done(backend, eids) == N, "executions were lost or stuck"
        # All terminal within lease TTL + scanner/reclaim intervals (+ restart slack) after the last fault.
        assert finished_at - last_fault < LEASE_TTL_MS / 1000 + 15
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
        for p in procs.values():
            if p.poll() is None:
                p.kill()
        if scanners is not None and scanners.poll() is None:
            scanners.kill()
        backend.close()
        server.stop()


def _safe_done(backend: Backend, eids: list[str]) -> int:
    for _ in range(50):
        try:
            return _done(backend, eids)
        except Exception:
            time.sleep(0.2)
    raise AssertionError("Valkey did not come back")
