"""Every page, the REST list and /metrics answer while a primary fails over (issue #41 item 3): a page whose
reads land on the dead node says Valkey is briefly unavailable (503) — never a 500 or a traceback — and every
page is back to 200 once the replica took over."""

from __future__ import annotations

import time

import pytest

from dashboard import backend as dashboard_backend_module
from ffcore.backend import Backend
from ffcore.embedded import EmbeddedCluster
from ffcore.execution.client import Client
from ffcore.settings import Settings
from tests.cluster.conftest import KILLED, KILLED_REPLICA

pytestmark = pytest.mark.django_db

PAGES = ["/", "/system/", "/executions/", "/workers/", "/audit/", "/waitpoints/", "/flows/", "/budgets/",
         "/quotas/", "/schedules/", "/metrics", "/healthz", "/v1/executions"]
PROMOTION_BOUND_S = 20.0


@pytest.fixture
def dashboard_on_ha(ha_cluster: EmbeddedCluster):
    url = f"valkey+cluster://127.0.0.1:{ha_cluster.nodes[1].port}"  # a node that stays up names the cluster
    dashboard_backend_module.reset_backend()
    dashboard_backend_module._backend = Backend.connect(Settings.from_url(url))
    yield dashboard_backend_module._backend
    dashboard_backend_module.reset_backend()


def _statuses(client) -> dict[str, int]:
    return {p: client.get(p).status_code for p in PAGES}


def test_pages_answer_during_a_failover_and_all_recover(ha_cluster, dashboard_on_ha, operator_client):
    operator_client.raise_request_exception = False  # a crash must show as a 500 here, not as a raised error
    c = Client(dashboard_on_ha)
    for i in range(30):
        c.create(kind="page-probe", lane=f"pf-{i}")
    assert set(_statuses(operator_client).values()) == {200}
    ha_cluster.kill(KILLED)
    seen: set[int] = set()
    sweeps_before_promotion = 0
    deadline = time.monotonic() + PROMOTION_BOUND_S
    while ha_cluster.role(KILLED_REPLICA) != "master":
        got = _statuses(operator_client)
        seen |= set(got.values())
        sweeps_before_promotion += 1
        assert 500 not in got.values(), got
        assert time.monotonic() < deadline, "the replica was never promoted"
    assert sweeps_before_promotion >= 1  # the pages were read while the dead node still owned its slots
    deadline = time.monotonic() + PROMOTION_BOUND_S
    while (got := _statuses(operator_client)) and set(got.values()) != {200}:
        assert 500 not in got.values(), got
        seen |= set(got.values())
        assert time.monotonic() < deadline, got
        time.sleep(0.2)
    print("statuses seen during the failover:", sorted(seen), "sweeps before the promotion:",
          sweeps_before_promotion)
    assert seen <= {200, 503}, seen
