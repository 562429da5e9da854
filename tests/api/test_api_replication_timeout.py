"""With FF_DURABILITY=replicated, a write no replica confirmed is a 503 the client may retry, naming why
(issue #41 item 1) — never a 500, never reported as done."""

from __future__ import annotations

import json

import pytest

from dashboard import backend as dashboard_backend_module
from ffcore.backend import Backend

pytestmark = pytest.mark.django_db


@pytest.fixture
def replicated_without_replicas(backend: Backend):
    """The test server has no replica, so no write can be confirmed."""
    dashboard_backend_module.reset_backend()
    dashboard_backend_module._backend = Backend.connect(
        backend.settings.__class__.from_url(backend.settings.valkey_url, durability="replicated",
                                            wait_timeout_ms=50))
    yield dashboard_backend_module._backend
    dashboard_backend_module.reset_backend()


def test_an_unconfirmed_create_is_a_retryable_503_naming_replication(client, replicated_without_replicas):
    body = {"execution_kind": "k", "lane_id": "default", "idempotency_key": "rep-1"}
    r = client.post("/v1/executions", json.dumps(body), content_type="application/json")
    assert r.status_code == 503, r.content
    err = r.json()
    assert err["kind"] == "replication_timeout" and err["retryable"] is True
    assert "may not survive a failover" in err["error"] and "FF_WAIT_TIMEOUT_MS" in err["error"]
    # Reads still answer: a read sends no WAIT.
    assert client.get("/v1/executions").status_code == 200
