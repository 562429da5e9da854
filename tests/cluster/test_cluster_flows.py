"""Flows on the local 3-primary cluster: several flows (so several primaries) run to completion through the
completion listener's pub/sub, are listed and projected, and a flow cancel (a transaction on the flow's
slot) cancels every unfinished member."""

from __future__ import annotations

from ffcore.backend import Backend
from ffcore.engine.flow_scanners import CancelReconciler, FlowProjector
from ffcore.flows import reads as flow_reads
from ffcore.flows.cancel import cancel_flow
from ffcore.flows.flows import Flows
from ffcore.reads import decode_map
from ffcore.worker.worker import Registry
from tests.ffcore.flowkit import LANE, all_finished, scanners, states, wait_until, workers
from tests.ffcore.invariants import check


def _diamond(flows: Flows) -> tuple[str, list[str]]:
    fid = flows.create(kind="diamond")
    ids = flows.build(fid, [{"kind": k, "lane": LANE} for k in ("top", "left", "right", "bottom")],
                      edges=[(0, 1), (0, 2), (1, 3), (2, 3)])
    return fid, [str(e) for e in ids]


def test_flows_on_every_primary_run_to_completion_and_are_listed(cbackend: Backend):
    flows = Flows(cbackend)
    made = [_diamond(flows) for _ in range(6)]
    assert len({flows.partition(f) for f, _ in made}) > 3
    reg = Registry()
    reg.handler("*")(lambda task: {"kind": task.kind})
    with scanners(cbackend), workers(cbackend, reg):
        for fid, _ in made:
            assert set(wait_until(lambda fid=fid: all_finished(flows, fid)).values()) == {"completed"}
    for _, ids in made:
        for e in ids:
            check(cbackend, e)
    page = flow_reads.list_flows(cbackend, limit=50)
    assert {r.flow_id for r in page.rows} == {f for f, _ in made}
    assert {r.counts.get("completed") for r in page.rows} == {4}
    assert FlowProjector(cbackend).tick() >= len(made)
    fid = made[0][0]
    summary = decode_map(cbackend.client.hgetall(flow_reads.flow_keys(cbackend, fid).summary))
    assert summary["members_completed"] == "4" and summary["total_members"] == "4"


def test_cancelling_a_flow_cancels_its_unfinished_members(cbackend: Backend):
    flows = Flows(cbackend)
    fid, ids = _diamond(flows)
    out = cancel_flow(cbackend, fid, reason="operator", wait=True)
    assert out.status == "cancelled" and sorted(out.members) == sorted(ids)
    assert out.report is not None and out.report.remaining == 0
    assert set(states(flows, fid).values()) == {"cancelled"}
    again = cancel_flow(cbackend, fid, reason="operator")
    assert again.status == "already_terminal"
    assert CancelReconciler(cbackend, grace_ms=0).tick() == 0  # nothing left in the backlog
    for e in ids:
        check(cbackend, e)
