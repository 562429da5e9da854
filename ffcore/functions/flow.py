"""FCALL builders of flow.lua: flows, members, dependency edges, cancel_flow (contract §5.39–§5.46).

`ff_replay_execution` (§5.47) lives with the lifecycle builders; `Client.replay` passes a skipped flow
member's inbound edge ids.
"""

from __future__ import annotations

from collections.abc import Sequence

from .. import keys
from ..keys import ExecKeys, FlowKeys, PartitionKeys
from .base import Call, fn

#: dependency_kind when none is given (contract §5.42 ARGV 5).
SUCCESS_ONLY = "success_only"


@fn("ff_create_flow")
def create_flow(n: int, flow_id: str, *, kind: str, namespace: str, now_ms: int = 0) -> Call:
    fk = FlowKeys(n, flow_id)
    return Call("ff_create_flow", [fk.core, fk.members, PartitionKeys(n).flow_index],
                [flow_id, kind, namespace, now_ms])


@fn("ff_add_execution_to_flow")
def add_execution_to_flow(n: int, flow_id: str, k: ExecKeys, *, now_ms: int = 0) -> Call:
    # The member must live on the flow's partition (one slot); callers check before building this.
    fk = FlowKeys(n, flow_id)
    return Call("ff_add_execution_to_flow", [fk.core, fk.members, PartitionKeys(n).flow_index, k.core],
                [flow_id, k.eid, now_ms])


@fn("ff_cancel_flow")
def cancel_flow(n: int, flow_id: str, *, reason: str, policy: str = "cancel_all", now_ms: int = 0,
                grace_ms: int | None = None) -> Call:
    """v0.2.0's shape; with `grace_ms` v0.13's, which also records the owed member cancels and the backlog."""
    fk = FlowKeys(n, flow_id)
    if grace_ms is None:
        return Call("ff_cancel_flow", [fk.core, fk.members, PartitionKeys(n).flow_index],
                    [flow_id, reason, policy, now_ms])
    return Call("ff_cancel_flow", [fk.core, fk.members, PartitionKeys(n).flow_index,
                                   keys.flow_pending_cancels(n, flow_id), keys.cancel_backlog(n)],
                [flow_id, reason, policy, now_ms, grace_ms])


@fn("ff_ack_cancel_member")
def ack_cancel_member(n: int, flow_id: str, execution_id: str) -> Call:
    return Call("ff_ack_cancel_member", [keys.flow_pending_cancels(n, flow_id), keys.cancel_backlog(n)],
                [execution_id, flow_id])


@fn("ff_set_edge_group_policy")
def set_edge_group_policy(fk: FlowKeys, downstream: str, *, variant: str, on_satisfied: str = "", k: int = 0,
                          now_ms: int) -> Call:
    return Call("ff_set_edge_group_policy", [fk.core, fk.edgegroup(downstream)], [variant, on_satisfied, k, now_ms])


@fn("ff_drain_sibling_cancel_group")
def drain_sibling_cancel_group(n: int, flow_id: str, downstream: str, cancelled: Sequence[str] = ()) -> Call:
    """Upstream's 2 KEYS / 2 ARGV, plus our record of the siblings the dispatcher cancelled."""
    fk = FlowKeys(n, flow_id)
    return Call("ff_drain_sibling_cancel_group",
                [keys.pending_cancel_groups(n), fk.edgegroup(downstream), fk.edgegroup_cancelled(downstream)],
                [flow_id, downstream, *cancelled])


@fn("ff_reconcile_sibling_cancel_group")
def reconcile_sibling_cancel_group(n: int, flow_id: str, downstream: str) -> Call:
    return Call("ff_reconcile_sibling_cancel_group",
                [keys.pending_cancel_groups(n), FlowKeys(n, flow_id).edgegroup(downstream)], [flow_id, downstream])


@fn("ff_stage_dependency_edge")
def stage_dependency_edge(
    fk: FlowKeys, *, edge_id: str, upstream: str, downstream: str, expected_revision: int | str, now_ms: int,
    kind: str = SUCCESS_ONLY, data_passing_ref: str = "",
) -> Call:
    return Call("ff_stage_dependency_edge", [
        fk.core, fk.members, fk.edge(edge_id), fk.outgoing(upstream), fk.incoming(downstream), fk.grant(edge_id),
    ], [fk.flow_id, edge_id, upstream, downstream, kind, data_passing_ref, str(expected_revision), now_ms])


@fn("ff_apply_dependency_to_child")
def apply_dependency_to_child(
    child: ExecKeys, *, lane: str, flow_id: str, edge_id: str, upstream: str, graph_revision: int | str,
    now_ms: int, kind: str = SUCCESS_ONLY, data_passing_ref: str = "",
) -> Call:
    lk = child.lane(lane)
    # v0.13's shape (KEYS[8] the child's edge-group record).
    return Call("ff_apply_dependency_to_child", [
        child.core, child.deps_meta, child.deps_unresolved, child.dep_edge(edge_id), lk.eligible,
        lk.blocked_dependencies, child.deps_all_edges, FlowKeys(child.eid.partition_index, flow_id).edgegroup(
            str(child.eid)),
    ], [flow_id, edge_id, upstream, str(graph_revision), kind, data_passing_ref, now_ms])


@fn("ff_resolve_dependency")
def resolve_dependency(
    child: ExecKeys, *, lane: str, attempt_index: int, edge_id: str, upstream: str, outcome: str, now_ms: int,
    flow_id: str = "",
) -> Call:
    """v0.2.0's shape without `flow_id`; with it v0.13's (the edge group decides any_of / quorum children)."""
    lk = child.lane(lane)
    base = [child.core, child.deps_meta, child.deps_unresolved, child.dep_edge(edge_id), lk.eligible, lk.terminal,
            lk.blocked_dependencies, child.attempt(attempt_index), child.stream_meta(attempt_index), child.payload,
            ExecKeys(upstream).result]
    if not flow_id:
        return Call("ff_resolve_dependency", base, [edge_id, outcome, now_ms])
    n, down = child.eid.partition_index, str(child.eid)
    fk = FlowKeys(n, flow_id)
    return Call("ff_resolve_dependency", [*base, fk.edgegroup(down), fk.incoming(down), keys.pending_cancel_groups(n)],
                [edge_id, outcome, now_ms, flow_id, down])


@fn("ff_evaluate_flow_eligibility")
def evaluate_flow_eligibility(k: ExecKeys) -> Call:
    return Call("ff_evaluate_flow_eligibility", [k.core, k.deps_meta], [], readonly=True)


@fn("ff_promote_blocked_to_eligible")
def promote_blocked_to_eligible(k: ExecKeys, *, lane: str, now_ms: int) -> Call:
    lk = k.lane(lane)
    return Call("ff_promote_blocked_to_eligible", [
        k.core, lk.blocked_dependencies, lk.eligible, k.deps_meta, k.deps_unresolved,
    ], [k.eid, now_ms])


__all__ = ["SUCCESS_ONLY", "ack_cancel_member", "add_execution_to_flow", "apply_dependency_to_child", "cancel_flow",
           "create_flow", "drain_sibling_cancel_group", "evaluate_flow_eligibility", "promote_blocked_to_eligible",
           "reconcile_sibling_cancel_group", "resolve_dependency", "set_edge_group_policy", "stage_dependency_edge"]
