"""Which operator actions a state allows: the engine's own preconditions, written down once (issue #25).

The contract functions check these conditions before their first write and refuse with the codes
below; this table states the same conditions in Python so that a page offers an action only where the
engine would take it, and a door can refuse a stale form with the engine's own code and words before
making the call. `tests/ffcore/test_action_rules.py` crosses every public state with every action
against the real functions, so the table cannot drift from the Lua.

- cancel (ff_cancel_execution): anything not terminal; else execution_not_active.
- replay (ff_replay_execution): terminal with replays left (the policy's max_replay_count, default 10);
  else execution_not_terminal / max_replays_exhausted.
- revoke (ff_revoke_lease): active and holding a live lease (`leased`); else execution_not_active /
  no_active_lease. An expired or already revoked lease is "already satisfied": nothing to offer.
- priority (ff_change_priority): runnable and eligible now (waiting for a worker); else execution_not_eligible.
- take (ff_issue_grant_and_claim, ours: operations §4.7): runnable and eligible now or quota-blocked; else
  execution_not_eligible
  (the engine also refuses grant_already_exists while a worker's claim grant is outstanding: not in E:core).
- cancel flow (ff_cancel_flow): a flow not cancelled, completed or failed; else flow_already_terminal.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from ffcore.backend import Backend
from ffcore.errors import script_error
from ffcore.keys import ExecKeys
from ffcore.reads import text

#: The execution page's actions, in the order the page shows them.
EXECUTION_ACTIONS = ("cancel", "replay", "revoke", "priority", "take")
#: Flow states in which ff_cancel_flow refuses (and cancel_flow answers "already terminal").
TERMINAL_FLOW_STATES = frozenset({"cancelled", "completed", "failed"})
#: ff_replay_execution's cap when the policy names none.
DEFAULT_MAX_REPLAYS = 10


def _int(value: object, default: int) -> int:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return default


def refusal(action: str, core: Mapping[str, str], *, max_replays: int | None = None) -> str | None:
    """The engine's refusal code for `action` on an execution whose `E:core` fields are `core`, or None.

    `core` needs lifecycle_phase, ownership_state and eligibility_state (and replay_count for replay);
    `max_replays` is the policy's `max_replay_count` when it has one.
    """
    phase = core.get("lifecycle_phase", "")
    if action == "cancel":
        return "execution_not_active" if phase == "terminal" else None
    if action == "replay":
        if phase != "terminal":
            return "execution_not_terminal"
        cap = DEFAULT_MAX_REPLAYS if max_replays is None else max_replays
        return "max_replays_exhausted" if _int(core.get("replay_count"), 0) >= cap else None
    if action == "revoke":
        if phase != "active":
            return "execution_not_active"
        return None if core.get("ownership_state") == "leased" else "no_active_lease"
    if action in ("priority", "take"):
        # Take also releases a quota block (ffcore.worker.grants.issue_grant_and_claim): an operator's override.
        ok_states = ("eligible_now", "blocked_by_quota") if action == "take" else ("eligible_now",)
        ok = phase == "runnable" and core.get("eligibility_state") in ok_states
        return None if ok else "execution_not_eligible"
    raise ValueError(f"unknown action {action!r}")


def allowed(core: Mapping[str, str], *, max_replays: int | None = None) -> tuple[str, ...]:
    """The execution actions the engine would take now, in page order."""
    return tuple(a for a in EXECUTION_ACTIONS if refusal(a, core, max_replays=max_replays) is None)


def flow_cancel_refusal(public_flow_state: str) -> str | None:
    """ff_cancel_flow's refusal for a flow in this state (None: cancelling it does something)."""
    return "flow_already_terminal" if public_flow_state in TERMINAL_FLOW_STATES else None


#: The E:core fields `refusal` reads.
RULE_FIELDS = ("lifecycle_phase", "ownership_state", "eligibility_state", "replay_count")


#: The engine function behind each action (named in a refusal raised before the call).
FUNCTIONS = {"cancel": "ff_cancel_execution", "replay": "ff_replay_execution", "revoke": "ff_revoke_lease",
             "priority": "ff_change_priority", "take": "ff_issue_grant_and_claim"}


def max_replays_of(policy_json: str | None) -> int | None:
    """A stored policy's `max_replay_count` (None when it names none or does not parse)."""
    try:
        policy = json.loads(policy_json or "")
    except ValueError:
        return None
    cap = policy.get("max_replay_count") if isinstance(policy, dict) else None
    return cap if isinstance(cap, int) else None


def precheck(backend: Backend, eid: str, action: str) -> None:
    """Refuse `action` on `eid` with the engine's typed error when the table says the engine would (one read).

    An execution that does not exist passes: the engine's own call then answers execution_not_found.
    A state that changes between this read and the call is still judged by the engine itself.
    """
    k = ExecKeys(eid)
    pipe = backend.client.pipeline(transaction=False)
    pipe.hmget(k.core, [*RULE_FIELDS, "terminal_outcome", "current_lease_epoch"])
    pipe.get(k.policy)
    raw, policy = pipe.execute()
    core = dict(zip((*RULE_FIELDS, "terminal_outcome", "current_lease_epoch"), (text(v) if v else "" for v in raw),
                    strict=True))
    if not core["lifecycle_phase"]:
        return
    code = refusal(action, core, max_replays=max_replays_of(text(policy) if policy else None))
    if code is not None:
        details = [core["terminal_outcome"], core["current_lease_epoch"]] if code == "execution_not_active" else []
        raise script_error(code, details, FUNCTIONS[action])
