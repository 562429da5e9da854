"""The flow page's edge groups: each group's policy and the siblings it cancelled, and a why line naming a group
still waiting (server-rendered; tests/browser/test_edge_groups_browser.py draws it)."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from ffcore.backend import Backend
from ffcore.flows.dag import resolve_outgoing
from ffcore.flows.flows import Flows
from tests.ffcore.invariants import claim, complete

pytestmark = pytest.mark.django_db

QUORUM = {"kind": "quorum", "k": 2, "on_satisfied": "cancel_remaining"}


def _quorum_flow(backend: Backend) -> tuple[str, list[str]]:
    """fetch a, b, c -> merge (quorum 2 of 3, cancel remaining); a second join -> report (any of, let run)."""
    flows = Flows(backend)
    fid = flows.create(kind="mirrors")
    members = [{"kind": "fetch", "tags": {"app.name": f"mirror {x}"}} for x in "abc"]
    members += [{"kind": "merge", "tags": {"app.name": "merge"}}, {"kind": "report"}]
    ids = [str(e) for e in flows.build(fid, members, edges=[(0, 3), (1, 3), (2, 3), (0, 4), (1, 4)],
                                       groups={3: QUORUM, 4: {"kind": "any_of", "on_satisfied": "let_run"}})]
    return fid, ids


def _finish(backend: Backend, fid: str, eid: str) -> None:
    complete(backend, eid, claim(backend, eid))
    resolve_outgoing(backend, [(eid, fid, "success")])


def test_the_why_line_names_the_group_still_waiting(viewer_client, dashboard_backend):
    fid, ids = _quorum_flow(dashboard_backend)
    _finish(dashboard_backend, fid, ids[0])
    html = viewer_client.get(f"/flows/{fid}/").content.decode()
    assert 'id="flow-why"' in html
    assert ("Waiting: merge waits for its edge group (quorum 2 of 3 · cancel remaining): 1 of 2 needed succeeded, "
            "2 still running") in html
    assert 'id="edge-groups" open' in html and "any of 2 · let run" in html


def test_the_group_table_shows_the_policy_and_the_siblings_it_cancelled(viewer_client, dashboard_backend):
    fid, ids = _quorum_flow(dashboard_backend)
    _finish(dashboard_backend, fid, ids[0])
    _finish(dashboard_backend, fid, ids[1])  # quorum met: mirror c is cancelled
    html = viewer_client.get(f"/flows/{fid}/").content.decode()
    row = html[html.index(f'<tr data-eid="{ids[3]}">'):]
    row = row[:row.index("</tr>")]
    assert "quorum 2 of 3 · cancel remaining" in row and "g-satisfied" in row
    cancelled = row[row.index("data-cancelled"):]
    assert f'href="/executions/{quote(ids[2], safe=":")}/">mirror c</a>' in cancelled and "mirror a" not in cancelled
    assert 'id="flow-why"' not in html  # nothing waits on a group any more
    data = viewer_client.get(f"/flows/{fid}/").context["v"].data
    assert {n["id"]: n.get("group") for n in data["nodes"]}[ids[3]] == "quorum 2 of 3 · cancel remaining"
