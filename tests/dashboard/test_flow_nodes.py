"""Issue #36: what the flow page's graph says about each member and which member it opens on."""

from __future__ import annotations

import pytest

from dashboard.selectors.flows import FOCUS_THRESHOLD, flow_states, flow_view
from ffcore.flows.dag import resolve_outgoing
from ffcore.flows.flows import Flows
from tests.ffcore.invariants import claim, complete, fail

pytestmark = pytest.mark.django_db


def _nodes(view):
    return {n["id"]: n for n in view.data["nodes"]}


def test_a_member_is_named_by_its_name_tag_else_by_kind_and_short_id_with_its_times(dashboard_backend):
    flows = Flows(dashboard_backend)
    fid = flows.create(kind="k")
    a, b = flows.build(fid, [{"kind": "split", "tags": {"app.name": "split the batch"}}, {"kind": "leaf"}], [(0, 1)])
    complete(dashboard_backend, a, claim(dashboard_backend, a))
    nodes = _nodes(flow_view(dashboard_backend, fid))
    assert nodes[a]["label"] == "split the batch" and nodes[a]["kind"] == "split"
    assert nodes[b]["label"] == f"leaf {str(b).rsplit(':', 1)[-1][:8]}"
    assert 0 < nodes[a]["started"] <= nodes[a]["ended"] and nodes[b]["started"] == nodes[b]["ended"] == 0
    states = flow_states(dashboard_backend, fid)
    assert states["times"][a] == [nodes[a]["started"], nodes[a]["ended"]]


def test_the_page_opens_on_the_failed_member_else_the_running_one_else_the_root(dashboard_backend):
    flows = Flows(dashboard_backend)
    fid = flows.create(kind="k")
    ids = flows.build(fid, [{"kind": "leaf"} for _ in range(5)], [(4, i) for i in range(4)])
    assert flow_view(dashboard_backend, fid).data["start"] == ids[4]  # nothing happened yet: the root
    complete(dashboard_backend, ids[4], claim(dashboard_backend, ids[4]))
    resolve_outgoing(dashboard_backend, [(ids[4], fid, "success")])
    claim(dashboard_backend, ids[2])
    assert flow_view(dashboard_backend, fid).data["start"] == ids[2]
    fail(dashboard_backend, ids[1], claim(dashboard_backend, ids[1]))
    assert flow_view(dashboard_backend, fid).data["start"] == ids[1]


def test_a_big_flow_with_nothing_of_interest_opens_on_its_root(dashboard_backend):
    flows = Flows(dashboard_backend)
    fid = flows.create(kind="k")
    n = FOCUS_THRESHOLD + 5
    ids = flows.build(fid, [{"kind": "leaf"} for _ in range(n)], [(0, i) for i in range(1, n)])
    v = flow_view(dashboard_backend, fid)
    assert v.focus_mode and v.focus == ids[0] and v.data["start"] == ids[0]
