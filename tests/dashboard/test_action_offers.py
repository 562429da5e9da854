"""The execution page offers exactly the actions the engine would take (issue #25, item 2).

Every public state is rendered for an operator and the offered forms compared with
ffcore.execution.rules (whose agreement with the engine tests/ffcore/test_action_rules.py checks);
a stale form for an action the state no longer allows is refused before the call, in the engine's words.
"""

from __future__ import annotations

import re

import pytest

from ffcore import audit
from ffcore.execution import rules
from ffcore.execution.client import Client
from ffcore.flows.flows import Flows
from tests import state_zoo
from tests.keyspace import changed, keyspace

pytestmark = pytest.mark.django_db

EXPECTED = {
    "waiting": {"cancel", "priority", "take"}, "delayed": {"cancel"}, "rate_limited": {"cancel"},
    "waiting_children": {"cancel"}, "active": {"cancel", "revoke"}, "suspended": {"cancel"},
    "completed": {"replay"}, "failed": {"replay"}, "cancelled": {"replay"}, "expired": {"replay"},
    "skipped": {"replay"},
}


def _offered(html: str) -> set[str]:
    return set(re.findall(r'<form class="action" id="action-(\w+)"', html))


def test_every_public_state_offers_exactly_the_allowed_actions(operator_client, viewer, dashboard_backend):
    from django.test import Client as DjangoClient

    viewer_client = DjangoClient()
    viewer_client.force_login(viewer)
    zoo = state_zoo.build(dashboard_backend)
    assert set(zoo) == set(EXPECTED)  # every public state is in the matrix
    for state, (eid,) in zoo.items():
        html = operator_client.get(f"/executions/{eid}/").content.decode()
        assert _offered(html) == EXPECTED[state], state
        assert set(rules.allowed(Client(dashboard_backend).get_execution(eid).core)) == EXPECTED[state], state
        if not EXPECTED[state]:
            assert 'id="no-actions"' in html
        assert _offered(viewer_client.get(f"/executions/{eid}/").content.decode()) == set()  # viewers: none


def test_a_stale_form_is_refused_in_the_engine_s_words_and_changes_nothing(operator_client, dashboard_backend):
    zoo = state_zoo.build(dashboard_backend)
    eid = zoo["rate_limited"][0]
    before = keyspace(dashboard_backend)
    r = operator_client.post(f"/executions/{eid}/priority", {"priority-priority": "9", "priority-reason": "stale"},
                             HTTP_HX_REQUEST="true")
    assert r.status_code == 409
    assert "Priority can only change while the execution is waiting for a worker." in r.content.decode()
    after = keyspace(dashboard_backend)
    assert not {k for k in changed(before, after) if not k.startswith("ff:audit")}
    (entry,) = [e for e in audit.recent(dashboard_backend) if e.target == eid]
    assert entry.outcome.startswith("refused") and "execution_not_eligible" in entry.outcome

    done = zoo["completed"][0]
    r = operator_client.post(f"/executions/{done}/cancel", {"cancel-reason": "stale"})
    assert r.status_code == 409
    body = r.content.decode()
    assert "The execution is not active (it already finished: success)." in body
    assert _offered(body) == {"cancel", "replay"}  # the refused form keeps its message; the others follow the state


def test_cancel_flow_is_offered_only_on_a_flow_that_is_not_finished(operator_client, dashboard_backend):
    flows = Flows(dashboard_backend)
    fid = flows.create(kind="offer")
    flows.build(fid, [{"kind": "a", "lane": "offer"}], [])
    assert 'id="flow-cancel"' in operator_client.get(f"/flows/{fid}/").content.decode()
    flows.cancel(fid, reason="done", wait=True)
    assert 'id="flow-cancel"' not in operator_client.get(f"/flows/{fid}/").content.decode()
