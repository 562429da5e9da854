"""`set_edge_group_policy` (v0.13): how a downstream member's inbound edges decide it.

A member's inbound edges form one group with a policy (upstream's EdgeDependencyPolicy, serde tag `kind`):
- `all_of` (the default): the child runs when every edge is satisfied, is skipped at the first impossible one;
- `any_of` + `on_satisfied`: runs at the first upstream success, skipped when none can succeed;
- `quorum` + `k` + `on_satisfied`: runs at k successes, skipped when fewer than k remain possible.
`on_satisfied: cancel_remaining` cancels the upstreams still running once the group fired (the sibling-cancel
dispatcher, `ffcore.flows.sibling_cancel`); `let_run` lets them finish, their outcomes only counted.

The policy lives in the child's edge-group record (`FlowKeys.edgegroup`) and must be set before the first
edge into the child is applied. A child whose edges exist already is `all_of` (restating it is
`already_set`, nothing written; another policy is refused as already fixed).
"""

from __future__ import annotations

from typing import Any

from ffcore import functions as F
from ffcore.backend import Backend
from ffcore.errors import ERRORS, InvalidInput, ScriptError
from ffcore.ids import ExecutionId, parse_flow_id
from ffcore.keys import FlowKeys
from ffcore.reads import text

from .reads import flow_keys

#: Policy kinds of upstream's EdgeDependencyPolicy (serde tag `kind`).
KINDS = ("all_of", "any_of", "quorum")
ON_SATISFIED = ("cancel_remaining", "let_run")
SET, ALREADY_SET = "set", "already_set"
_FIELDS = {"all_of": {"kind"}, "any_of": {"kind", "on_satisfied"}, "quorum": {"kind", "k", "on_satisfied"}}


def _bad(detail: str) -> ScriptError:
    return InvalidInput("invalid_input", [detail])


def check_policy(policy: Any) -> dict[str, Any]:
    """An EdgeDependencyPolicy object, normalised; anything else raises InvalidInput naming the field."""
    if not isinstance(policy, dict) or not isinstance(policy.get("kind"), str):
        raise _bad('policy must be an object with a "kind" (all_of, any_of, quorum)')
    kind = policy["kind"]
    if kind not in KINDS:
        raise _bad(f"policy.kind {kind!r} is not one of {', '.join(KINDS)}")
    extra = sorted(set(policy) - _FIELDS[kind])
    if extra:
        raise _bad(f"policy.{extra[0]} is not a field of an {kind} policy")
    if kind == "all_of":
        return {"kind": kind}
    on = policy.get("on_satisfied")
    if on not in ON_SATISFIED:
        raise _bad(f"policy.on_satisfied must be one of {', '.join(ON_SATISFIED)} for {kind}")
    if kind == "any_of":
        return {"kind": kind, "on_satisfied": on}
    k = policy.get("k")
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 2**32 - 1:
        raise _bad("policy.k must be a whole number >= 1 for quorum")
    return {"kind": kind, "k": k, "on_satisfied": on}


def precheck_unfixed(backend: Backend, fk: FlowKeys, members: list[str]) -> None:
    """Refuse (before anything is written) a policy for an existing member that already has inbound edges."""
    if not members:
        return
    pipe = backend.client.pipeline(transaction=False)
    for m in members:
        pipe.scard(fk.incoming(m))
    for m, inbound in zip(members, pipe.execute(), strict=True):
        if inbound:
            raise _bad(f"policy.kind cannot change for {m}: edge_group_policy_already_fixed "
                       "(dependencies already staged)")


def set_edge_group_policy(backend: Backend, flow_id: str, downstream_execution_id: str, policy: Any) -> str:
    """Set the inbound edge-group policy of one flow member: "set", or "already_set" when it is in effect.

    Raises InvalidInput for a malformed policy or one that can no longer change (edges already applied),
    FlowNotFound for an unknown flow and ExecutionNotInFlow for an execution that is not a member of it."""
    p = check_policy(policy)
    fid = parse_flow_id(flow_id)
    eid = ExecutionId(downstream_execution_id)
    fk = flow_keys(backend, fid)
    pipe = backend.client.pipeline(transaction=False)
    pipe.hget(fk.core, "flow_id")
    pipe.sismember(fk.members, str(eid))
    pipe.hmget(fk.edgegroup(str(eid)), ["policy_variant", "n"])
    pipe.scard(fk.incoming(str(eid)))
    stored, member, (variant, n), inbound = pipe.execute()
    if not text(stored):
        raise ERRORS["flow_not_found"]("flow_not_found", [fid], "set_edge_group_policy")
    if not member:
        raise ERRORS["execution_not_in_flow"]("execution_not_in_flow", [str(eid)], "set_edge_group_policy")
    if inbound or int(text(n) or 0) > 0:
        # Fixed by its edges (all_of for edges applied before edge-group records existed): a restatement is a
        # no-op, a change is refused.
        if (text(variant) or "all_of") == p["kind"]:
            return ALREADY_SET
        raise _bad("policy.kind cannot change: edge_group_policy_already_fixed (dependencies already staged)")
    try:
        reply = backend.call(F.set_edge_group_policy(fk, str(eid), variant=p["kind"],
                                                     on_satisfied=p.get("on_satisfied", ""), k=p.get("k", 0),
                                                     now_ms=backend.now_ms()))
    except InvalidInput as e:
        # The library's words, under the field they are about.
        raise _bad(f"policy.kind: {' '.join(e.details)}") from e
    return SET if reply[0] == SET else ALREADY_SET
