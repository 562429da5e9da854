"""One validation for a policy whichever door builds it (#39 item 4): the constructor refuses, naming the field,
what a mapping (REST, schedules) is refused for — nothing is stored silently."""

from __future__ import annotations

from typing import Any

import pytest

from ffcore.execution.client import Client
from ffcore.policy import Backoff, Policy, PolicyError, RetryPolicy, StreamPolicy, SuspensionPolicy, policy_from_mapping
from ffcore.schedules import ScheduleInvalid
from tests.keyspace import keyspace

BUDGET = "6f1e0b6c-1f1e-4c3a-9a57-3c1b1b1b1b1b"

# (constructor keywords, the same policy as a mapping, the field both name)
BAD: list[tuple[dict[str, Any], dict[str, Any], str]] = [
    ({"max_signals_per_execution": 5}, {"max_signals_per_execution": 5}, "policy.max_signals_per_execution"),
    ({"suspension": SuspensionPolicy(timeout_behavior="bogus")}, {"suspension_policy": {"timeout_behavior": "bogus"}},
     "policy.suspension_policy.timeout_behavior"),
    ({"stream": StreamPolicy(durability_mode="x")}, {"stream_policy": {"durability_mode": "x"}},
     "policy.stream_policy.durability_mode"),
    ({"stream": StreamPolicy(retention_maxlen=0)}, {"stream_policy": {"retention_maxlen": 0}},
     "policy.stream_policy.retention_maxlen"),
    ({"retry": RetryPolicy(max_retries=-1)}, {"retry_policy": {"max_retries": -1}}, "policy.retry_policy.max_retries"),
    ({"retry": RetryPolicy(backoff=Backoff(kind="linear"))}, {"retry_policy": {"backoff": {"type": "linear"}}},
     "policy.retry_policy.backoff.type"),
    ({"dedup_window_ms": 0}, {"dedup_window_ms": 0}, "policy.dedup_window_ms"),
    ({"attempt_timeout_ms": "30s"}, {"timeout_policy": {"attempt_timeout_ms": "30s"}},
     "policy.timeout_policy.attempt_timeout_ms"),
    ({"budget_ids": ("not-a-budget",)}, {"budget_ids": ["not-a-budget"]}, "policy.budget_ids"),
]


@pytest.mark.parametrize(("kw", "mapping", "field"), BAD, ids=[b[2] for b in BAD])
def test_the_constructor_refuses_what_a_mapping_is_refused_for_naming_the_same_field(kw, mapping, field):
    with pytest.raises(PolicyError) as built:
        Policy(**kw)
    with pytest.raises(PolicyError) as read:
        policy_from_mapping(mapping)
    assert built.value.field == field and read.value.field.startswith(field)
    assert field in str(built.value)


def test_max_signals_per_execution_other_than_the_delivery_cap_raises_and_the_cap_itself_is_kept():
    with pytest.raises(PolicyError, match="must be 10000"):
        Policy(max_signals_per_execution=5)
    assert Policy(max_signals_per_execution=10_000).as_json() == {"max_signals_per_execution": 10_000}


def test_a_valid_policy_built_either_way_is_the_same_policy():
    built = Policy(retry=RetryPolicy(max_retries=2, backoff=Backoff(kind="fixed", delay_ms=5)), attempt_timeout_ms=1000,
                   budget_ids=(BUDGET,), stream=StreamPolicy(durability_mode="durable"),
                   suspension=SuspensionPolicy(default_timeout_ms=500, timeout_behavior="escalate"),
                   max_signals_per_execution=10_000)
    assert policy_from_mapping(built.as_json()) == built


def test_a_schedule_template_with_a_bad_policy_is_refused_naming_the_field_and_writes_nothing(backend):
    before = keyspace(backend)
    with pytest.raises(ScheduleInvalid) as e:
        Client(backend).schedules.create(name="bad", kind="job", interval_ms=1000,
                                         policy={"max_signals_per_execution": 5})
    assert e.value.field == "template.policy" and "policy.max_signals_per_execution" in str(e.value)
    assert keyspace(backend) == before
