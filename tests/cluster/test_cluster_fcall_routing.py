"""FCALLs are routed by their KEYS on the client (issue #23's cluster benchmark found redis-py asking the server
with COMMAND GETKEYS before every FCALL: one more round trip per call)."""

from __future__ import annotations

from ffcore.execution.client import Client
from ffcore.worker.worker import Registry, Worker, WorkerConfig


def getkeys_calls(cluster) -> int:
    total = 0
    for i in range(3):
        stats = cluster._client(i).info("commandstats")
        total += int(stats.get("cmdstat_command|getkeys", {}).get("calls", 0))
    return total


def test_fcalls_and_fcall_pipelines_need_no_getkeys(cluster, cbackend):
    before = getkeys_calls(cluster)
    c = Client(cbackend)
    for _ in range(20):
        c.create(kind="k", lane="route")  # one FCALL each, in a pipeline with the registry writes
    c.create_many([{"kind": "k", "lane": f"route{i}"} for i in range(20)])
    w = Worker(cbackend, WorkerConfig(lanes=("route",), concurrency=8), Registry())
    tasks = w.claim_next(8)
    for t in tasks:
        t.complete(b"ok")
    assert len(tasks) == 8
    assert getkeys_calls(cluster) == before
