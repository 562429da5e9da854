"""A flow's History (ffcore.flows.history): created, members, edges, a member finishing, the cancel."""

from __future__ import annotations

from ffcore.flows import history
from ffcore.flows.dag import resolve_outgoing
from ffcore.flows.flows import Flows
from tests.ffcore.flowkit import LANE
from tests.ffcore.invariants import claim, complete


def test_a_flow_history_lists_members_edges_completion_and_cancel(backend):
    flows = Flows(backend)
    fid = flows.create()
    ids = flows.build(fid, [{"kind": "head", "lane": LANE}, {"kind": "leaf", "lane": LANE}], edges=[(0, 1)])
    complete(backend, ids[0], claim(backend, ids[0], lane=LANE))
    resolve_outgoing(backend, [(ids[0], fid, "success")])
    flows.cancel(fid, reason="stop it", wait=True)

    entries = history.read(backend, fid)
    assert entries is not None
    kinds = [e.kind for e in entries]
    assert kinds[0] == "created" and kinds.count("member") == 2 and kinds.count("edge") == 1
    assert kinds.index("member_finished") < kinds.index("cancelled")
    edge = next(e for e in entries if e.kind == "edge")
    assert f"{ids[0]} → {ids[1]}" in edge.detail
    assert "stop it" in next(e for e in entries if e.kind == "cancelled").detail
    assert kinds[-1] == "finished"  # every member ended (one completed, one cancelled)
    assert [e.ts for e in entries] == sorted(e.ts for e in entries)
    page = history.page(backend, fid, limit=3)
    assert page is not None and page.entries == entries[:3] and page.next_cursor == "3"


def test_an_unknown_flow_has_no_history(backend):
    assert history.read(backend, "00000000-0000-4000-8000-000000000000") is None
