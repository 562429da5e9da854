"""Execution policy fields (#24 item 6): every field is honoured or refused naming it, never dropped."""

from __future__ import annotations

import json
import random
import time

import pytest

from ffcore.engine.stream_scanners import RetentionTrimmer
from ffcore.engine.timeouts import ExecutionDeadlineScanner
from ffcore.errors import InvalidInput
from ffcore.execution.client import Client
from ffcore.keys import ExecKeys
from ffcore.policy import PolicyError, policy_from_mapping, retry_json_for_failure
from ffcore.worker.worker import Registry, Worker, WorkerConfig

from .invariants import check, zscore

FULL = {
    "retry_policy": {"max_retries": 2, "retryable_categories": ["IOError", "TimeoutError"],
                     "backoff": {"type": "exponential", "initial_delay_ms": 400, "max_delay_ms": 5000,
                                 "multiplier": 3.0, "jitter": True}},
    "timeout_policy": {"attempt_timeout_ms": 30_000, "execution_deadline_ms": 600_000},
    "max_reclaim_count": 7, "max_replay_count": 4,
    "routing_requirements": {"required_capabilities": ["gpu"]},
    "dedup_window_ms": 60_000,
    "stream_policy": {"durability_mode": "durable", "retention_maxlen": 50, "retention_ttl_ms": 3_600_000},
    "fallback_policy": {"tiers": [{"provider": "p1", "model": "m1", "timeout_ms": 2000},
                                  {"provider": "p2", "model": "m2"}]},
    "max_signals_per_execution": 10_000,
    "suspension_policy": {"default_timeout_ms": 90_000, "timeout_behavior": "escalate"},
}


def _task(backend, policy, caps=()):
    Client(backend).create(kind="job", policy=policy)
    (task,) = Worker(backend, WorkerConfig(worker_instance_id="w-pol", capabilities=caps), Registry()).claim_next(1)
    return task


# ------------------------------------------------------------------ refusals
@pytest.mark.parametrize(("data", "field"), [
    ({"retry_polcy": {}}, "policy.retry_polcy"),
    ({"retry_policy": {"max_retries": 1, "backof": {}}}, "policy.retry_policy.backof"),
    ({"retry_policy": {"backoff": {"type": "fixed", "jitter": True}}}, "policy.retry_policy.backoff.jitter"),
    ({"retry_policy": {"backoff": {"type": "linear"}}}, "policy.retry_policy.backoff.type"),
    ({"retry_policy": {"backoff": {"multiplier": "x"}}}, "policy.retry_policy.backoff.multiplier"),
    ({"retry_policy": {"retryable_categories": "io"}}, "policy.retry_policy.retryable_categories"),
    ({"timeout_policy": {"execution_deadline_ms": 0}}, "policy.timeout_policy.execution_deadline_ms"),
    ({"timeout_policy": {"grace_ms": 5}}, "policy.timeout_policy.grace_ms"),
    ({"max_reclaim_count": 3, "timeout_policy": {"max_reclaim_count": 4}}, "policy.timeout_policy.max_reclaim_count"),
    ({"suspension_policy": {"timeout_behavior": "explode"}}, "policy.suspension_policy.timeout_behavior"),
    ({"suspension_policy": {"default_timeout_ms": 0}}, "policy.suspension_policy.default_timeout_ms"),
    ({"suspension_policy": {"resume_target": "x"}}, "policy.suspension_policy.resume_target"),
    ({"priority": 5}, "policy.priority"),
    ({"delay_until": 1}, "policy.delay_until"),
    ({"max_signals_per_execution": 5}, "policy.max_signals_per_execution"),
    ({"routing_requirements": {"isolation_level": "strict"}}, "policy.routing_requirements.isolation_level"),
    ({"routing_requirements": {"preferred_locality": "eu"}}, "policy.routing_requirements.preferred_locality"),
    ({"stream_policy": {"durability_mode": "eventual"}}, "policy.stream_policy.durability_mode"),
    ({"stream_policy": {"retention_maxlen": 0}}, "policy.stream_policy.retention_maxlen"),
    ({"stream_policy": {"compression": "zstd"}}, "policy.stream_policy.compression"),
    ({"fallback_policy": {"tiers": [{"provider": "p"}]}}, "policy.fallback_policy.tiers.0.model"),
    ({"dedup_window_ms": -1}, "policy.dedup_window_ms"),
    ({"budget_ids": ["not-a-uuid"]}, "policy.budget_ids"),
])
def test_a_field_we_cannot_honour_is_refused_naming_it(data, field):
    with pytest.raises(PolicyError) as info:
        policy_from_mapping(data)
    assert info.value.field == field
    assert field in str(info.value)
    assert isinstance(info.value, ValueError) and isinstance(info.value, InvalidInput)


def test_every_supported_field_round_trips_through_the_stored_policy(backend):
    policy = policy_from_mapping(FULL)
    eid = Client(backend).create(kind="job", policy=policy).execution_id
    stored = json.loads(backend.client.get(ExecKeys(eid).policy))
    assert stored == {**FULL, "routing_requirements": {"required_capabilities": ["gpu"]}}
    assert policy_from_mapping(stored) == policy


def test_upstream_nulls_and_defaults_read_as_absent():
    upstream = {"priority": 0, "delay_until": None, "retry_policy": None, "timeout_policy": None,
                "max_reclaim_count": 100, "suspension_policy": None, "fallback_policy": None,
                "max_replay_count": 10, "budget_ids": [], "routing_requirements": None, "dedup_window_ms": None,
                "stream_policy": None, "max_signals_per_execution": 10_000}
    assert policy_from_mapping(upstream).as_json() == {"max_reclaim_count": 100, "max_replay_count": 10,
                                                       "max_signals_per_execution": 10_000}
    assert policy_from_mapping({"timeout_policy": {"max_reclaim_count": 9}}).max_reclaim_count == 9


# ------------------------------------------------------------------ behaviour
def test_retryable_categories_decide_whether_a_failure_is_retried(backend):
    rp = {"retry_policy": {"max_retries": 3, "retryable_categories": ["IOError"],
                           "backoff": {"type": "fixed", "delay_ms": 1}}}
    listed = _task(backend, policy_from_mapping(rp))
    assert listed.fail("flaky disk", "IOError").retry_scheduled
    assert check(backend, listed.execution_id)["lifecycle_phase"] == "runnable"
    other = _task(backend, policy_from_mapping(rp))
    assert not other.fail("bad input", "ValueError").retry_scheduled
    c = check(backend, other.execution_id)
    assert c["public_state"] == "failed" and c["retry_count"] == "0"


def test_jitter_draws_the_retry_delay_from_the_upper_half_of_the_computed_one(backend):
    policy = {"retry_policy": {"max_retries": 5, "backoff": {"type": "exponential", "initial_delay_ms": 1000,
                                                             "max_delay_ms": 60_000, "multiplier": 2.0,
                                                             "jitter": True}}}
    low = json.loads(retry_json_for_failure(policy, "x", lambda: 2, _Fixed(2000)))
    high = json.loads(retry_json_for_failure(policy, "x", lambda: 2, _Fixed(0)))
    assert low["backoff"] == {"type": "fixed", "delay_ms": 2000} and low["max_retries"] == 5
    assert high["backoff"] == {"type": "fixed", "delay_ms": 4000}
    plain = {"retry_policy": {**policy["retry_policy"], "backoff": {"type": "exponential"}}}
    assert json.loads(retry_json_for_failure(plain, "x", _never)) == plain["retry_policy"]
    # End to end: the first retry waits between 500 and 1000 ms of the server clock.
    task = _task(backend, policy_from_mapping(policy))
    before = backend.now_ms()
    out = task.fail("boom", "RuntimeError")
    after = backend.now_ms()
    assert out.retry_scheduled and before + 500 <= out.delay_until <= after + 1000


class _Fixed(random.Random):
    def __init__(self, value: int) -> None:
        super().__init__(0)
        self.value = value

    def randint(self, a: int, b: int) -> int:
        assert a == 0 and self.value <= b
        return self.value


def _never() -> int:
    raise AssertionError("retry_count is read only for jitter")


def test_stream_retention_maxlen_caps_every_attempt_stream(backend):
    task = _task(backend, policy_from_mapping({"stream_policy": {"retention_maxlen": 2}}))
    for i in range(4):
        task.append_frame("log", f"line {i}")
    frames = backend.client.xrange(task.keys.stream(task.attempt_index))
    assert [f[1][b"payload"] for f in frames] == [b"line 2", b"line 3"]


def test_stream_retention_ttl_is_what_the_trimmer_keeps_a_finished_execution_for(backend):
    short = _task(backend, policy_from_mapping({"stream_policy": {"retention_ttl_ms": 1}}))
    short.complete()
    kept = _task(backend, policy_from_mapping({"stream_policy": {"retention_ttl_ms": 3_600_000}}))
    kept.complete()
    for t in (short, kept):  # both finished a minute ago as far as their terminal index knows
        backend.client.zadd(t.keys.lane("default").terminal, {t.execution_id: backend.now_ms() - 60_000})
    assert RetentionTrimmer(backend).tick() == 1
    assert not backend.client.exists(short.keys.core)
    assert check(backend, kept.execution_id)["public_state"] == "completed"


def test_execution_deadline_ms_sets_a_deadline_from_the_create_that_the_scanner_enforces(backend):
    before = int(time.time() * 1000)
    far = Client(backend).create(kind="job", policy=policy_from_mapping(
        {"timeout_policy": {"execution_deadline_ms": 600_000}})).execution_id
    score = zscore(backend, ExecKeys(far).idx.execution_deadline, far)
    assert score is not None and before + 600_000 <= score <= int(time.time() * 1000) + 600_000
    soon = Client(backend).create(kind="job", policy=policy_from_mapping(
        {"timeout_policy": {"execution_deadline_ms": 1}}), deadline_at=backend.now_ms() + 600_000).execution_id
    assert zscore(backend, ExecKeys(soon).idx.execution_deadline, soon) < score  # the earlier deadline wins
    scanner = ExecutionDeadlineScanner(backend)
    for _ in range(200):
        if scanner.tick():
            break
        time.sleep(0.01)
    assert check(backend, soon)["public_state"] == "expired"
    assert check(backend, far)["public_state"] == "waiting"


def test_dedup_window_ms_is_the_idempotency_keys_lifetime(backend):
    c = Client(backend)
    eid = c.create(kind="job", idempotency_key="once",
                   policy=policy_from_mapping({"dedup_window_ms": 60_000})).execution_id
    key = ExecKeys(eid).idx.idempotency("default", "once")
    assert 0 < backend.client.pttl(key) <= 60_000
    c.create(kind="job", idempotency_key="twice")
    assert backend.client.pttl(ExecKeys(eid).idx.idempotency("default", "twice")) > 60_000


def test_suspension_policy_gives_suspend_the_timeout_and_behaviour_the_call_leaves_out(backend):
    from .suspension_support import with_secrets

    hb = with_secrets(backend)
    policy = policy_from_mapping({"suspension_policy": {"default_timeout_ms": 90_000, "timeout_behavior": "cancel"}})
    task = _task(hb, policy)
    before = hb.now_ms()
    task.suspend("approved")
    susp = {k.decode(): v.decode() for k, v in hb.client.hgetall(task.keys.suspension_current).items()}
    assert susp["timeout_behavior"] == "cancel"
    assert before + 90_000 <= int(susp["timeout_at"]) <= hb.now_ms() + 90_000
    explicit = _task(hb, policy)
    explicit.suspend("approved", timeout_ms=5_000, timeout_behavior="expire")
    susp = {k.decode(): v.decode() for k, v in hb.client.hgetall(explicit.keys.suspension_current).items()}
    assert susp["timeout_behavior"] == "expire" and int(susp["timeout_at"]) <= hb.now_ms() + 5_000
