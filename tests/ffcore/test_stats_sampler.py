"""The stats sampler behind the overview charts (issue #25, item 4): endings counted once from the terminal
indexes (whoever ended them), backlog per lane per minute, claim-to-complete percentiles."""

from __future__ import annotations

from ffcore import keys
from ffcore.engine import stats
from ffcore.engine.registry import build_scanners
from ffcore.execution.client import Client
from ffcore.policy import Policy
from ffcore.worker.worker import Registry, Worker, WorkerConfig


def _run(backend, lane: str, ok: int, bad: int) -> None:
    c = Client(backend)
    for _ in range(ok + bad):
        c.create(kind="s", lane=lane, policy=Policy())
    tasks = Worker(backend, WorkerConfig(lanes=(lane,), worker_instance_id=f"w-{lane}", concurrency=ok + bad),
                   Registry()).claim_next(ok + bad)
    for t in tasks[:ok]:
        t.complete(b"ok")
    for t in tasks[ok:]:
        t.fail("boom", "test")


def test_endings_are_counted_once_per_minute_with_backlog_and_latency(backend):
    _run(backend, "st-a", ok=3, bad=1)
    _run(backend, "st-b", ok=2, bad=0)
    c = Client(backend)
    c.cancel(c.create(kind="s", lane="st-b").execution_id, reason="not counted as done or failed")
    for _ in range(4):
        c.create(kind="s", lane="st-a")  # backlog
    later = backend.now_ms() + stats.SETTLE_MS + 1
    assert stats.sample(backend, later) == 7  # every ending, cancels included, was read once
    assert stats.sample(backend, later) == 0  # the cursor moved past them
    s = stats.read_series(backend, ["st-a", "st-b"], later)
    assert sum(s.done) == 5 and sum(s.failed) == 1
    assert len(s.done) == s.minutes == 60
    assert s.backlog["st-a"][-1] == 4 and s.backlog["st-b"][-1] == 0
    assert s.backlog["st-a"][0] is None  # no sample an hour ago
    p50, p95, n = s.latency["st-a"]
    assert n == 3 and 0 <= p50 <= p95
    assert s.latency["st-b"][2] == 2


def test_only_one_sampler_counts_at_a_time_and_ffscanners_runs_it(backend):
    _run(backend, "st-c", ok=1, bad=0)
    sampler = next(s for s in build_scanners(backend) if isinstance(s, stats.StatsSampler))
    backend.client.set(keys.STATS_LOCK, "someone else", px=5000)
    assert sampler.tick() == 0
    assert backend.client.get(keys.STATS_LOCK) == b"someone else"  # not taken from its holder
    backend.client.delete(keys.STATS_LOCK)
    backend.client.set(keys.STATS_CURSOR, backend.now_ms() - 60_000)
    sampler.settle_ms = -1  # count what ended up to now (the ending above is in the past millisecond or this one)
    assert sampler.tick() == 1
    assert not backend.client.exists(keys.STATS_LOCK)
    assert 0 < backend.client.ttl(keys.stats_minute(stats.minute_of(backend.now_ms()))) <= stats.KEEP_S


def test_latency_percentiles_come_from_a_histogram_within_its_bucket_ratio():
    per: dict[int, int] = {}
    for ms in range(1, 1001):
        b = stats.latency_bucket(ms)
        per[b] = per.get(b, 0) + 1
        assert ms <= stats.bucket_value(b) * 1.0001 and stats.bucket_value(b) <= ms * stats.LATENCY_RATIO + 1
    for q, exact in ((0.5, 500), (0.95, 950)):
        got = stats.hist_percentile(per, q)
        assert exact <= got <= exact * stats.LATENCY_RATIO + 1, (q, got)
    assert stats.hist_percentile({}, 0.5) == 0
