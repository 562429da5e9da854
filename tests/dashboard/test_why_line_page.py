"""Why-4 item 3 (page): the execution page's "why isn't this running" line says when no live worker serves the
execution's lane, and says it waits for a worker once one does."""

from __future__ import annotations

import pytest

from ffcore.execution.client import Client
from ffcore.worker.heartbeat import Heartbeat

pytestmark = pytest.mark.django_db


def test_the_page_says_no_live_worker_serves_the_lane_until_one_does(viewer_client, dashboard_backend):
    eid = Client(dashboard_backend).create(kind="job", lane="manual").execution_id
    html = viewer_client.get(f"/executions/{eid}/").content.decode()
    assert "No live worker serves lane manual" in html and "Waiting for a worker on lane manual" not in html
    hb = Heartbeat(dashboard_backend, worker_id="w", wiid="wi-page", lanes=("manual",), capabilities_csv="",
                   concurrency=1, interval_ms=2000, lease_ttl_ms=30_000)
    hb.register()
    try:
        html = viewer_client.get(f"/executions/{eid}/").content.decode()
        assert "Waiting for a worker on lane manual" in html and "No live worker serves" not in html
    finally:
        hb.unregister()
