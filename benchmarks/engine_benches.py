"""Benchmarks of our engine alone: the raw ceiling (S1's functions pipelined, no worker logic), S4
(capability-routed claims) and M1 (Valkey memory per finished execution)."""

from __future__ import annotations

import threading
import time
from typing import Any

from benchmarks.common import percentile, progress
from ffcore import functions as F
from ffcore.backend import Backend
from ffcore.execution.client import Client
from ffcore.ids import new_uuid
from ffcore.keys import ExecKeys
from ffcore.partition import lane_partition
from ffcore.policy import Policy
from ffcore.settings import Settings

LANE = "ceiling"


def _flush(backend: Backend) -> None:
    from ffcore.connection import ensure_partition_config

    backend.client.execute_command("FLUSHALL", "SYNC")  # a lazy flush would still be freeing memory (M1)
    ensure_partition_config(backend.client, backend.settings.partitions)


def _create(client: Client, n: int, batch: int = 500, payload: bytes = b"", *, contract: bool = False) -> list[str]:
    """n creates in pipelines of `batch`: through ffcore's create (ff_create_fast), or with `contract` the
    contract's ff_create_execution alone."""
    out: list[str] = []
    for start in range(0, n, batch):
        specs = [{"kind": "noop", "lane": LANE, "payload": payload} for _ in range(min(batch, n - start))]
        if contract:
            calls = [client.create_call(**spec) for spec in specs]
            replies = client.backend.call_many(calls)
            assert all(isinstance(r, F.Reply) for r in replies), replies
            out += [str(r[0]) for r in replies]
        else:
            out += [r.execution_id for r in client.create_many(specs)]
    return out


def _valkey_cpu(backend: Backend) -> float:
    info = backend.client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def ceiling(url: str, n: int) -> dict[str, Any]:
    """create -> grant -> claim -> complete (contract, 4 calls) and ff_create_fast -> ff_claim_next (x16) ->
    ff_complete_batch_and_claim (x64, the worker's fast path), every step pipelined in batches of 500;
    tasks/s over the whole cycle, from one process."""
    backend = Backend.connect(Settings.from_url(url))
    client = Client(backend)
    out: dict[str, Any] = {}
    try:
        for variant in ("contract", "fastpath"):
            _flush(backend)
            cpu0, t0 = _valkey_cpu(backend), time.perf_counter()
            eids = _create(client, n, contract=variant == "contract")
            fences: list[tuple[str, F.Fence]] = []
            if variant == "contract":
                for start in range(0, n, 500):
                    calls: list[F.Call] = []
                    chunk = eids[start:start + 500]
                    ids = [(new_uuid(), new_uuid()) for _ in chunk]
                    for e, (lid, aid) in zip(chunk, ids, strict=True):
                        k = ExecKeys(e)
                        calls.append(F.issue_claim_grant(k, lane=LANE, worker_id="w", worker_instance_id="wi"))
                        calls.append(F.claim_execution(k, lane=LANE, worker_id="w", worker_instance_id="wi",
                                                       lease_id=lid, attempt_id=aid, lease_ttl_ms=30_000))
                    replies = backend.call_many(calls)
                    for e, r in zip(chunk, replies[1::2], strict=True):
                        assert isinstance(r, F.Reply), r
                        fences.append((e, F.Fence(r[0], int(r[1]), r[3], int(r[4]), "wi", LANE)))
            else:
                part = lane_partition(LANE, backend.settings.partitions.flow)
                for start in range(0, n, 500):
                    calls = [F.claim_next(part, lane=LANE, worker_id="w", worker_instance_id="wi", capabilities_csv="",
                                          lease_ttl_ms=30_000, ids=[(new_uuid(), new_uuid()) for _ in range(16)])
                             for _ in range(0, min(500, n - start), 16)]
                    for r in backend.call_many(calls):
                        assert isinstance(r, F.Reply), r
                        for c in r.raw[0].claimed:
                            fences.append((c.execution_id, F.Fence(c.lease_id, c.lease_epoch, c.attempt_id,
                                                                   c.attempt_index, "wi", LANE)))
            for start in range(0, len(fences), 512):
                chunk_f = fences[start:start + 512]
                if variant == "contract":
                    replies = backend.call_many([F.complete_execution(ExecKeys(e), f) for e, f in chunk_f])
                else:
                    replies = backend.call_many([
                        F.complete_batch_and_claim([(ExecKeys(e), f, b"") for e, f in chunk_f[j:j + 64]],
                                                   worker_id="w", capabilities_csv="", lease_ttl_ms=30_000, ids=[])
                        for j in range(0, len(chunk_f), 64)])
                assert all(isinstance(r, F.Reply) for r in replies), replies
                if variant != "contract":
                    assert all(o is None for r in replies for o in r.raw[0].outcomes or []), replies
            dt, cpu = time.perf_counter() - t0, _valkey_cpu(backend) - cpu0
            if len(fences) != n:
                out[variant] = {"error": f"claimed {len(fences)} of {n}"}
                continue
            calls_per_task = 4 if variant == "contract" else 1 + 1 / 16 + 1 / 64
            out[variant] = {"tasks_per_s": n / dt, "valkey_cpu_us_per_task": cpu / n * 1e6,
                            "calls_per_task": round(calls_per_task, 2)}
            progress(f"ceiling {variant}: {n / dt:,.0f} tasks/s, Valkey CPU {cpu / n * 1e6:.0f} µs/task")
    finally:
        backend.close()
    return out


def routing(url: str, tasks: int, worker_sets: int, timeout_s: float = 180, processes: int = 2) -> dict[str, Any]:
    """S4: `worker_sets` workers, each with its own capability ("cap-j"), spread over `processes` worker
    processes (benchmarks.routed_workers; a deployment runs its capability pools as processes of their own),
    and `tasks` executions each requiring one of them, created by this process in batches of 100; workers
    claim as usual (from their capability's index; a mismatch -> grant refused -> route block, and the
    admission unblock scanner, run here, releases a blocked execution when a live worker has the capability).
    A warm-up task per capability runs first, untimed: every worker has then opened its connections."""
    import subprocess
    import sys

    from benchmarks import routed_workers
    from benchmarks.common import REPO
    from ffcore.engine.base import run_scanners
    from ffcore.engine.budget_scanners import UNBLOCK_INTERVAL_MS, AdmissionUnblockScanner

    backend = Backend.connect(Settings.from_url(url))
    _flush(backend)
    client = Client(backend)
    r = backend.client
    cuts = [worker_sets * k // processes for k in range(processes + 1)]
    procs = [subprocess.Popen([sys.executable, "-m", "benchmarks.routed_workers", url, str(a), str(b)], cwd=REPO,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
             for a, b in zip(cuts, cuts[1:], strict=False) if b > a]
    stop = threading.Event()
    try:
        for p in procs:
            assert p.stdout is not None
            if p.stdout.readline().strip() != "READY":
                raise RuntimeError("a routed worker process did not start")
        # At its deployed interval (`ffscanners`' default): every 100 ms it sent a read per partition and blocked
        # set ten times a second from this process, beside the creates it times (and none of S4's tasks is
        # route-blocked since the capability index: each is claimed from it by a capable worker).
        scanner = AdmissionUnblockScanner(backend, interval_ms=UNBLOCK_INTERVAL_MS)
        threading.Thread(target=run_scanners, args=([scanner], stop), daemon=True).start()
        time.sleep(1.0)  # heartbeats registered: the unblock scanner sees every worker's capabilities

        def spec(j: int) -> dict[str, Any]:
            return {"kind": "routed", "lane": routed_workers.LANE, "payload": f'{{"cap":"cap-{j}"}}',
                    "policy": Policy(required_capabilities=(f"cap-{j}",))}

        client.create_many([spec(j) for j in range(worker_sets)])  # the warm-up: one task per capability
        deadline = time.monotonic() + timeout_s
        while r.llen(routed_workers.MARKS) < worker_sets and time.monotonic() < deadline:
            time.sleep(0.05)
        r.delete(routed_workers.MARKS)
        t0 = time.time()
        created: dict[str, float] = {}
        for start in range(0, tasks, 100):
            now = time.time()
            for res in client.create_many([spec(i % worker_sets) for i in range(start, min(tasks, start + 100))]):
                created[str(res.execution_id)] = now
        deadline = time.monotonic() + timeout_s
        last = -1
        while (got := int(r.llen(routed_workers.MARKS))) < tasks and time.monotonic() < deadline:
            if got != last:
                last = got
                progress(f"S4: {got}/{tasks} routed tasks ran")
            time.sleep(0.1)
        marks = routed_workers.read_marks(r)
    finally:
        stop.set()
        for p in procs:
            assert p.stdin is not None
            p.stdin.close()
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    done: dict[str, float] = {}
    wrong = 0
    for eid, wanted, ran_on, at in marks:
        if eid in created and eid not in done:
            done[eid] = at
            wrong += wanted != ran_on
    span = (max(done.values()) - t0) if done else float("nan")
    lat = sorted((done[e] - created[e]) * 1000 for e in done)
    backend.close()
    out: dict[str, Any] = {"tasks": tasks, "worker_capability_sets": worker_sets, "processes": len(procs),
                           "ran": len(done), "wrong_worker": wrong,
                           "tasks_per_s": len(done) / span if done else 0.0,
                           "p50_ms": percentile(lat, 50), "p95_ms": percentile(lat, 95)}
    if len(done) < tasks:
        out["error"] = f"only {len(done)} of {tasks} ran within {timeout_s:.0f} s"
    return out


def memory(url: str, n: int) -> dict[str, Any]:
    """M1: Valkey memory per finished execution (one attempt, 100-byte payload), measured as the growth of
    `used_memory` over n executions run through create -> claim -> complete, plus MEMORY USAGE per key."""
    backend = Backend.connect(Settings.from_url(url))
    _flush(backend)
    client = Client(backend)
    r = backend.client
    before = int(r.info("memory")["used_memory"])
    eids = _create(client, n, payload=b"x" * 100)
    part = lane_partition(LANE, backend.settings.partitions.flow)
    fences = []
    while len(fences) < n:
        reply = backend.call(F.claim_next(part, lane=LANE, worker_id="w", worker_instance_id="wi", capabilities_csv="",
                                          lease_ttl_ms=30_000, ids=[(new_uuid(), new_uuid()) for _ in range(64)]))
        got = reply.raw[0].claimed
        if not got:
            break
        fences += [(c.execution_id, F.Fence(c.lease_id, c.lease_epoch, c.attempt_id, c.attempt_index, "wi", LANE))
                   for c in got]
    for start in range(0, len(fences), 500):
        backend.call_many([F.complete_execution(ExecKeys(e), f) for e, f in fences[start:start + 500]])
    after = int(r.info("memory")["used_memory"])
    # Per-key breakdown of one finished execution.
    sample = eids[len(eids) // 2]
    uuid_part = sample.split(":", 1)[1]
    breakdown: dict[str, int] = {}
    for key in r.scan_iter(match=f"*{uuid_part}*", count=1000):
        name = key.decode().replace(sample, "<eid>")
        breakdown[name] = int(r.memory_usage(key, samples=0) or 0)
    backend.close()
    per = (after - before) / n
    progress(f"M1: {per:,.0f} bytes per finished execution ({n} executions)")
    return {"bytes_per_execution": per, "n": n, "per_key_bytes": dict(sorted(breakdown.items())),
            "per_key_total": sum(breakdown.values())}
