"""Issue #25 part A on a cluster: the bare-UUID probe, the prefix search and the stats sampler read across
every primary (one pipeline of single-key commands)."""

from __future__ import annotations

from ffcore.backend import Backend
from ffcore.engine import stats
from ffcore.execution import search
from ffcore.execution.client import Client
from ffcore.flows.flows import Flows
from ffcore.ids import ExecutionId
from ffcore.worker.worker import Registry, Worker, WorkerConfig


def test_search_and_the_sampler_work_across_primaries(cbackend: Backend):
    c = Client(cbackend)
    made = [c.create(kind="find", lane=f"cs{i}").execution_id for i in range(6)]  # lanes on several primaries
    for eid in made:
        assert search.search(cbackend, ExecutionId(eid).uuid).target == eid
    fid = Flows(cbackend).create(kind="find")
    assert search.search(cbackend, fid).kind == "flow"
    hit = search.search(cbackend, ExecutionId(made[3]).uuid[:8])
    assert made[3] in hit.matches
    for i in range(3):
        worker = Worker(cbackend, WorkerConfig(lanes=(f"cs{i}",), worker_instance_id=f"w-cs{i}"), Registry())
        (t,) = worker.claim_next(1)
        t.complete(b"ok")
    assert stats.sample(cbackend, cbackend.now_ms() + stats.SETTLE_MS + 1) >= 3
    s = stats.read_series(cbackend, [f"cs{i}" for i in range(6)])
    assert sum(s.done) >= 3 and s.backlog["cs5"][-1] == 1
