"""Property test of the whole REST API: generated requests from /api/openapi.json never get a 5xx.

Runs in-process over WSGI against the real app and a real Valkey. Half the cases get the ids of real
entities in their path (an execution with a finished attempt stream, a flow with members, a budget),
so validation is exercised past "unknown id"; both schema-conforming and deliberately invalid data
are generated.
"""

from __future__ import annotations

import os
from collections import Counter
from unittest import mock

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.generation import GenerationMode

from ffcore.budgets import budgets
from ffcore.execution.client import Client
from ffcore.flows.flows import Flows
from ffcore.suspension import hmac_secrets
from tests.ffcore.suspension_support import SECRET, claimed

pytestmark = pytest.mark.django_db

#: Generated requests per run (the issue asks for at least 1,000).
EXAMPLES = 1200
TOKEN = "property-test-token"

# The schema, like the docs, needs sign-in or the token: read it with the token this run uses.
with mock.patch.dict(os.environ, {"FF_API_TOKEN": TOKEN}):
    schema = schemathesis.openapi.from_wsgi("/api/openapi.json", get_wsgi_application(),
                                            headers={"Authorization": f"Bearer {TOKEN}"})


@pytest.fixture
def real_ids(dashboard_backend, monkeypatch):
    monkeypatch.setenv("FF_API_TOKEN", TOKEN)
    hmac_secrets.install(dashboard_backend, SECRET)
    task = claimed(dashboard_backend)
    task.append_frame("log", b"\xff\x00 frame")
    task.complete(b"ok")  # a closed stream: tails answer at once
    flows = Flows(dashboard_backend)
    fid = flows.create(kind="prop")
    flows.build(fid, [{"kind": "a"}, {"kind": "b"}], edges=[(0, 1)])
    bid, _ = budgets.create_budget(dashboard_backend, hard={"tokens": 1000})
    waiting = Client(dashboard_backend).create(kind="w").execution_id
    return {"execution_id": [task.execution_id, waiting], "flow_id": [fid], "budget_id": [bid], "worker_id": ["w1"]}


def test_generated_requests_never_get_a_server_error(real_ids):
    seen: Counter[str] = Counter()
    statuses: Counter[int] = Counter()
    failures: list[str] = []
    # The operation is drawn uniformly (schemathesis' own strategy over the whole schema left one of 50
    # operations without a single request, the same in every derandomized run).
    ops = [result.ok() for result in schema.get_all_operations()]

    def call(op, data, negative, swap):
        case = data.draw(op.as_strategy(GenerationMode.NEGATIVE if negative else GenerationMode.POSITIVE))
        params = case.path_parameters or {}
        for name in params:
            if swap and name in real_ids:
                params[name] = real_ids[name][swap % len(real_ids[name])]
        if isinstance(case.query, dict) and isinstance(case.query.get("block_ms"), int):
            case.query["block_ms"] = min(case.query["block_ms"], 50)  # an open stream would block the run
        response = case.call(headers={"Authorization": f"Bearer {TOKEN}"})
        seen[case.operation.label] += 1
        statuses[response.status_code // 100] += 1
        if response.status_code >= 500:
            failures.append(f"{response.status_code} {case.as_curl_command()}\n{response.text[:500]}")

    @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(data=st.data(), op=st.sampled_from(ops), negative=st.booleans(), swap=st.integers(0, 3))
    def run(data, op, negative, swap):
        call(op, data, negative, swap)

    run()

    def run_alone(op):  # a function per operation: @given refuses a test with a default argument
        @settings(max_examples=20, deadline=None, database=None, derandomize=True,
                  suppress_health_check=list(HealthCheck))
        @given(data=st.data(), negative=st.booleans(), swap=st.integers(0, 3))
        def run_one(data, negative, swap):
            call(op, data, negative, swap)

        return run_one

    # Derandomized sampling can still leave an operation undrawn as the API grows (one of 55 did): each such
    # operation gets a short run of its own, so every one is exercised.
    for op in ops:
        if op.label in seen:
            continue

        run_alone(op)()
    assert not failures, "\n\n".join(failures[:5])
    assert sum(seen.values()) >= 1000
    assert statuses[2] >= 100 and statuses[4] >= 100, statuses  # authenticated, and both paths exercised
    assert len(seen) == len(list(schema.get_all_operations())), sorted(seen)

