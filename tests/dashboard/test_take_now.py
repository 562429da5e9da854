"""The operator's "Take now" on the execution page (#24 item 8): offered only on an execution waiting for a
worker, leases it to `operator` with the reason audited; bad input is a form error next to its field and
a stale form is refused in words — neither writes anything."""

from __future__ import annotations

import pytest

from ffcore import audit
from ffcore.execution.client import Client
from tests.keyspace import changed, keyspace

pytestmark = pytest.mark.django_db


def writes(before, backend) -> list[str]:
    return [k for k in changed(before, keyspace(backend)) if not k.startswith("ff:audit")]


def test_take_now_leases_the_waiting_execution_to_the_operator(operator_client, dashboard_backend):
    eid = Client(dashboard_backend).create(kind="job", lane="default").execution_id
    page = operator_client.get(f"/executions/{eid}/").content.decode()
    assert 'id="action-take"' in page and 'name="take-lease_seconds"' in page and 'value="60"' in page
    r = operator_client.post(f"/executions/{eid}/take", {"take-reason": "debug it", "take-lease_seconds": "90"},
                             HTTP_HX_REQUEST="true")
    assert r.status_code == 200 and "Taken: leased to operator for 90 s" in r.content.decode()
    ex = Client(dashboard_backend).get_execution(eid)
    assert ex.core["public_state"] == "active" and ex.core["current_worker_id"] == "operator"
    assert int(ex.core["lease_expires_at"]) - int(ex.core["lease_acquired_at"]) == 90_000
    (entry,) = [e for e in audit.recent(dashboard_backend) if e.target == eid]
    assert (entry.action, entry.reason, entry.outcome) == ("grant_and_claim", "debug it", "ok")
    page = operator_client.get(f"/executions/{eid}/").content.decode()
    assert 'id="action-take"' not in page  # active now: no longer offered


#: Bad submissions and the field whose error each must show.
BAD = [
    ({"take-reason": "", "take-lease_seconds": "60"}, "reason"),
    ({"take-reason": "r", "take-lease_seconds": "0"}, "lease_seconds"),
    ({"take-reason": "r", "take-lease_seconds": "3601"}, "lease_seconds"),
    ({"take-reason": "r", "take-lease_seconds": "soon"}, "lease_seconds"),
    ({"take-reason": "r"}, "lease_seconds"),
]


def test_bad_input_is_a_form_error_next_to_the_field_and_a_stale_take_is_refused_in_words(operator_client,
                                                                                          dashboard_backend):
    c = Client(dashboard_backend)
    eid = c.create(kind="job", lane="default").execution_id
    before = keyspace(dashboard_backend)
    for data, field in BAD:
        r = operator_client.post(f"/executions/{eid}/take", data, HTTP_HX_REQUEST="true")
        assert r.status_code == 400 and f'data-error="{field}"' in r.content.decode(), data
    assert changed(before, keyspace(dashboard_backend)) == []  # not even an audit entry

    c.cancel(eid, reason="gone")
    before = keyspace(dashboard_backend)
    r = operator_client.post(f"/executions/{eid}/take", {"take-reason": "late", "take-lease_seconds": "60"},
                             HTTP_HX_REQUEST="true")
    assert r.status_code == 409
    assert "Only an execution waiting for a worker (or blocked by its quota) can be taken now." in r.content.decode()
    assert writes(before, dashboard_backend) == []
    (entry,) = [e for e in audit.recent(dashboard_backend) if e.action == "grant_and_claim"]
    assert "execution_not_eligible" in entry.outcome


def test_a_viewer_cannot_take(viewer_client, dashboard_backend):
    eid = Client(dashboard_backend).create(kind="job", lane="default").execution_id
    assert 'id="action-take"' not in viewer_client.get(f"/executions/{eid}/").content.decode()
    r = viewer_client.post(f"/executions/{eid}/take", {"take-reason": "x", "take-lease_seconds": "60"})
    assert r.status_code == 403
    assert Client(dashboard_backend).get_state(eid) == "waiting"


def test_take_now_is_offered_on_a_quota_blocked_execution_and_takes_it(operator_client, dashboard_backend):
    from ffcore.budgets.quotas import create_quota_policy
    from ffcore.policy import Policy
    from ffcore.worker.grants import claim_for_worker

    qid, _ = create_quota_policy(dashboard_backend, window_seconds=0, max_concurrent=1)
    c = Client(dashboard_backend)
    eids = [c.create(kind="job", lane="default", policy=Policy(quota_policy_id=qid)).execution_id for _ in range(2)]
    for wiid in ("wi-1", "wi-2"):
        claim_for_worker(dashboard_backend, lane="default", worker_id="w", worker_instance_id=wiid,
                         capabilities_csv="", grant_ttl_ms=5000)
    (held,) = [e for e in eids if c.get_execution(e).core["eligibility_state"] == "blocked_by_quota"]
    assert 'id="action-take"' in operator_client.get(f"/executions/{held}/").content.decode()
    r = operator_client.post(f"/executions/{held}/take", {"take-reason": "urgent", "take-lease_seconds": "60"},
                             HTTP_HX_REQUEST="true")
    assert r.status_code == 200 and "Taken: leased to operator" in r.content.decode()
    assert c.get_execution(held).core["current_worker_id"] == "operator"
