"""REST: a create's policy fields are honoured or refused with a 400 naming the field (#24 item 6); the
typed reads (#24 item 10)."""

from __future__ import annotations

import json

import pytest

from ffcore.keys import ExecKeys
from tests.keyspace import changed, keyspace

from .helpers import post

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(("policy", "field"), [
    ({"retry_policy": {"max_retries": 1}, "speed": "fast"}, "policy.speed"),
    ({"suspension_policy": {"default_timeout_ms": 1000}}, "policy.suspension_policy"),
    ({"stream_policy": {"retention_ttl_ms": "1h"}}, "policy.stream_policy.retention_ttl_ms"),
    ({"routing_requirements": {"isolation_level": "vm"}}, "policy.routing_requirements.isolation_level"),
])
def test_a_policy_field_we_cannot_honour_is_a_400_naming_it_and_creates_nothing(client, dashboard_backend, policy,
                                                                                 field):
    before = keyspace(dashboard_backend)
    r = post(client, "/v1/executions", {"execution_kind": "k", "policy": policy})
    assert r.status_code == 400, r.content
    assert field in r.json()["error"] and r.json()["kind"] == "invalid_input"
    assert changed(before, keyspace(dashboard_backend)) == []


def test_supported_policy_fields_are_stored_as_given(client, dashboard_backend):
    policy = {"stream_policy": {"durability_mode": "buffered", "retention_maxlen": 20, "retention_ttl_ms": 5000},
              "timeout_policy": {"execution_deadline_ms": 60_000},
              "retry_policy": {"max_retries": 1, "retryable_categories": ["io"],
                               "backoff": {"type": "fixed", "delay_ms": 10}}}
    r = post(client, "/v1/executions", {"execution_kind": "k", "policy": policy})
    assert r.status_code == 201, r.content
    eid = r.json()["Created"]["execution_id"]
    assert json.loads(dashboard_backend.client.get(ExecKeys(eid).policy)) == policy
    assert dashboard_backend.client.zscore(ExecKeys(eid).idx.execution_deadline, eid) is not None
