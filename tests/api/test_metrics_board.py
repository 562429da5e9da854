"""`/metrics` carries the series upstream's Grafana board reads (examples/grafana/flowfabric-ops.json), counted
by the worker, scanner and dashboard code paths into Valkey, with values that match what happened; and it
answers without Valkey."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from django.test import AsyncClient
from prometheus_client.parser import text_string_to_metric_families

from dashboard import backend as dashboard_backend_module
from ffcore import keys, metrics
from ffcore.backend import Backend
from ffcore.budgets.budgets import create_budget, report_usage
from ffcore.budgets.quotas import create_quota_policy
from ffcore.connection import ensure_partition_config
from ffcore.embedded import EmbeddedValkey
from ffcore.engine.base import run_scanners
from ffcore.engine.lease_expiry import LeaseExpiryScanner
from ffcore.errors import ScriptError
from ffcore.execution.client import Client
from ffcore.policy import Backoff, Policy, RetryPolicy
from ffcore.settings import Settings
from ffcore.worker.grant_claim import LocalScheduler, WorkerAtCapacity, claim_via_server
from ffcore.worker.worker import Registry, Worker, WorkerConfig
from tests.conftest import REPO
from tests.ffcore.workerkit import running
from tests.worker_handlers import handled_key


@pytest.fixture
def fresh(dashboard_backend):
    """A keyspace without counts left over from earlier tests of this process (their buffer is flushed first)."""
    metrics.recorder.flush(dashboard_backend)
    dashboard_backend.client.flushall()
    ensure_partition_config(dashboard_backend.client, dashboard_backend.settings.partitions)
    return dashboard_backend


def scrape(client) -> dict[tuple[str, frozenset], float]:
    r = client.get("/metrics")
    assert r.status_code == 200
    return {(s.name, frozenset(s.labels.items())): s.value
            for fam in text_string_to_metric_families(r.content.decode()) for s in fam.samples}


def value(samples, name, **labels) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def _wait(cond, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_a_worker_run_counts_outcomes_and_claim_latency_per_lane(client, fresh):
    reg = Registry()

    @reg.handler("ok")
    def ok(task):
        return {"fine": True}

    @reg.handler("boom")
    def boom(task):
        raise ValueError("no")

    c = Client(fresh)
    for kind in ("ok", "ok", "ok", "boom", "boom"):
        c.create(kind=kind, lane="m-run")
    w = Worker(fresh, WorkerConfig(lanes=("m-run",), worker_instance_id="w-metrics", concurrency=2), reg)
    with running([w]):
        _wait(lambda: w.completed >= 5)
    s = scrape(client)
    assert value(s, "ff_attempt_outcome_total", lane="m-run", outcome="ok") == 3
    assert value(s, "ff_attempt_outcome_total", lane="m-run", outcome="error") == 2
    claims = value(s, "ff_claim_from_grant_duration_seconds_count", lane="m-run")
    assert 1 <= claims <= 5  # every claim of the run (a task handed over by its create is no claim)
    assert value(s, "ff_claim_from_grant_duration_seconds_bucket", lane="m-run", le="+Inf") == claims
    assert 0 < value(s, "ff_claim_from_grant_duration_seconds_sum", lane="m-run") < claims * 5


def test_a_retried_failure_counts_as_retry(client, fresh):
    retry = RetryPolicy(2, Backoff("fixed", delay_ms=60_000))
    Client(fresh).create(kind="k", lane="m-retry", policy=Policy(retry=retry))
    (task,) = Worker(fresh, WorkerConfig(lanes=("m-retry",)), Registry()).claim_next(1)
    assert task.fail("flaky", "io").retry_scheduled
    assert value(scrape(client), "ff_attempt_outcome_total", lane="m-retry", outcome="retry") == 1


def test_renewals_capacity_refusals_quota_and_budget_hits_are_counted(client, fresh):
    c = Client(fresh)
    c.create(kind="k", lane="m-renew")
    w = Worker(fresh, WorkerConfig(lanes=("m-renew",), concurrency=1), Registry())
    (task,) = w.claim_next(1)
    task.renew()
    task.renew()
    with pytest.raises(WorkerAtCapacity):
        claim_via_server(w, "m-renew", source=LocalScheduler(fresh))
    c.revoke_lease(task.execution_id)
    with pytest.raises(ScriptError):
        task.renew()
    qid, _ = create_quota_policy(fresh, window_seconds=0, max_concurrent=1)
    for _ in range(3):
        c.create(kind="k", lane="m-quota", policy=Policy(quota_policy_id=qid))
    bid, _ = create_budget(fresh, hard={"tokens": 100})
    report_usage(fresh, bid, {"tokens": 100})
    c.create(kind="k", lane="m-quota", policy=Policy(budget_ids=(bid,)))
    got = Worker(fresh, WorkerConfig(lanes=("m-quota",), concurrency=4), Registry()).claim_next(4)
    assert len(got) == 1
    s = scrape(client)
    assert value(s, "ff_lease_renewal_total", outcome="ok") == 2
    assert value(s, "ff_lease_renewal_total", outcome="error") == 1
    assert value(s, "ff_worker_at_capacity_total") == 1
    assert value(s, "ff_quota_hit_total", reason="concurrency") == 2
    assert value(s, "ff_budget_hit_total", dimension="tokens") == 1


def test_scanner_cycles_and_the_cancel_backlog_are_reported(client, fresh):
    fresh.client.zadd(keys.cancel_backlog(0), {"flow-a": fresh.now_ms() + 60_000})
    fresh.client.sadd(keys.flow_pending_cancels(0, "flow-a"), "e1", "e2", "e3")
    stop = threading.Event()
    t = threading.Thread(target=run_scanners, args=([LeaseExpiryScanner(fresh, interval_ms=20)], stop), daemon=True)
    t.start()
    _wait(lambda: int(fresh.client.hget(keys.scanner_status("lease_expiry"), "ticks") or 0) >= 3)
    stop.set()
    t.join(5)
    s = scrape(client)
    cycles = value(s, "ff_scanner_cycle_total", scanner="lease_expiry")
    assert cycles >= 3
    assert value(s, "ff_scanner_cycle_duration_seconds_count", scanner="lease_expiry") == cycles
    assert 0 < value(s, "ff_scanner_cycle_duration_seconds_sum", scanner="lease_expiry") < cycles * 1.0
    assert value(s, "ff_scanner_lag_ms", scanner="lease_expiry") == 0
    assert value(s, "ff_cancel_backlog_depth") == 3
    assert value(s, "ff_valkey_up") == 1


def test_an_http_request_increments_the_request_counter_by_route(client, fresh):
    before = value(scrape(client), "ff_http_requests_total", method="GET", path="/healthz", status="200")
    assert client.get("/healthz").status_code == 200
    client.get("/healthz")
    s = scrape(client)
    assert value(s, "ff_http_requests_total", method="GET", path="/healthz", status="200") == before + 2
    assert value(s, "ff_http_requests_total", method="GET", path="/metrics", status="200") >= 1
    assert value(s, "ff_http_request_duration_seconds_count", method="GET", path="/healthz", status="200") == \
        before + 2


def test_worker_and_scanner_processes_report_through_the_dashboards_metrics(client, fresh, tmp_path):
    """`manage.py ffworker` and `manage.py ffscanners` as their own processes: their counts (outcomes, cycles, FCALL
    latency) reach this process's /metrics through Valkey."""
    c = Client(fresh)
    ok = [str(c.create(kind="count", lane="m-proc").execution_id) for _ in range(3)]
    c.create(kind="no-such-handler", lane="m-proc")  # fails: no handler registered
    env = {k: v for k, v in os.environ.items() if not k.startswith("FF_")}
    env.update({"FF_VALKEY_URL": fresh.url, "DJANGO_SECRET_KEY": "test", "FF_DATA_DIR": str(tmp_path),
                "FF_WAITPOINT_HMAC_SECRET": "5ec7e7" * 8})
    log = (tmp_path / "procs.log").open("wb")
    procs = [subprocess.Popen([sys.executable, "manage.py", *args], cwd=REPO, env=env, stdout=log,
                              stderr=subprocess.STDOUT)
             for args in (["ffworker", "--module", "tests.worker_handlers", "--lanes", "m-proc"], ["ffscanners"])]
    try:
        _wait(lambda: all(fresh.client.get(handled_key(e)) for e in ok), 30)
        _wait(lambda: fresh.client.hget(keys.metrics_family("ff_scanner_cycle_total"), '["lease_expiry"]'), 30)
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)  # a worker flushes its last counts as it unregisters
        for p in procs:
            p.wait(30)
        log.close()
    s = scrape(client)
    assert value(s, "ff_attempt_outcome_total", lane="m-proc", outcome="ok") == 3
    assert value(s, "ff_attempt_outcome_total", lane="m-proc", outcome="error") == 1
    assert value(s, "ff_fcall_seconds_count", function="ff_fail_execution") == 1  # the worker's FCALL
    assert value(s, "ff_scanner_cycle_total", scanner="lease_expiry") >= 1
    assert value(s, "ff_scanner_cycle_duration_seconds_count", scanner="lease_expiry") >= 1


def test_a_request_served_over_asgi_is_counted_too(client, fresh):
    r = asyncio.run(AsyncClient().get("/healthz"))
    assert r.status_code == 200
    assert value(scrape(client), "ff_http_requests_total", method="GET", path="/healthz", status="200") == 1


def test_metrics_answers_with_what_it_can_when_valkey_is_gone(client, backend, tmp_path):
    server = EmbeddedValkey(tmp_path, persistent=False).start()
    dashboard_backend_module.reset_backend()
    dashboard_backend_module._backend = Backend.connect(Settings.from_url(server.url))
    try:
        assert value(scrape(client), "ff_valkey_up") == 1
        server.stop()
        started = time.monotonic()
        r = client.get("/metrics")
        assert r.status_code == 200
        body = r.content.decode()
        assert "ff_valkey_up 0.0" in body and "ff_metrics_generated_at_seconds" in body
        assert time.monotonic() - started < 10
    finally:
        dashboard_backend_module.reset_backend()
        server.stop()
