"""`set_edge_group_policy` (operations §8.7) as the seed contract defines it: only `all_of` is accepted.

A downstream member's inbound edges form one group. Our library (the v0.2.0 contract) resolves every group
as `all_of` — the child runs when every edge is satisfied and is skipped as soon as one is impossible — so
setting `all_of` confirms what is already in effect (`already_set`, nothing written), and `any_of` /
`quorum` (HEAD-only in upstream) are refused naming the policy. The read side is
`ffcore.flows.reads.edge_groups`.
"""

from __future__ import annotations

from typing import Any

from ffcore.backend import Backend
from ffcore.errors import ERRORS, InvalidInput
from ffcore.ids import ExecutionId, parse_flow_id
from ffcore.reads import text

from .reads import flow_keys

#: Policy kinds of upstream's EdgeDependencyPolicy (serde tag `kind`).
KINDS = ("all_of", "any_of", "quorum")
ALREADY_SET = "already_set"


def check_policy(policy: Any) -> dict[str, Any]:
    """An EdgeDependencyPolicy object `{"kind": ...}` we can honour; anything else raises InvalidInput."""
    if not isinstance(policy, dict) or not isinstance(policy.get("kind"), str):
        raise InvalidInput("invalid_input", ['policy must be an object with a "kind" (all_of, any_of, quorum)'])
    kind = policy["kind"]
    if kind not in KINDS:
        raise InvalidInput("invalid_input", [f"policy.kind {kind!r} is not one of {', '.join(KINDS)}"])
    if kind != "all_of":
        raise InvalidInput("invalid_input", [f"policy.kind {kind} is not supported: every edge group is all_of "
                                             "(the seed contract accepts all_of only)"])
    extra = sorted(set(policy) - {"kind"})
    if extra:
        raise InvalidInput("invalid_input", [f"policy.{extra[0]} is not a field of an all_of policy"])
    return {"kind": kind}


def set_edge_group_policy(backend: Backend, flow_id: str, downstream_execution_id: str, policy: Any) -> str:
    """Set the inbound edge-group policy of one flow member; returns "already_set" (all_of is in effect).

    Raises InvalidInput for a policy other than all_of, FlowNotFound for an unknown flow and
    ExecutionNotInFlow for an execution that is not a member of it."""
    check_policy(policy)
    fid = parse_flow_id(flow_id)
    eid = ExecutionId(downstream_execution_id)
    fk = flow_keys(backend, fid)
    pipe = backend.client.pipeline(transaction=False)
    pipe.hget(fk.core, "flow_id")
    pipe.sismember(fk.members, str(eid))
    stored, member = pipe.execute()
    if not text(stored):
        raise ERRORS["flow_not_found"]("flow_not_found", [fid], "set_edge_group_policy")
    if not member:
        raise ERRORS["execution_not_in_flow"]("execution_not_in_flow", [str(eid)], "set_edge_group_policy")
    return ALREADY_SET
