"""Typed errors: configuration problems and one exception class per Lua error code (contract §6)."""

from __future__ import annotations


class FFError(Exception):
    """Base of every FlowFabric error."""


class ConfigError(FFError):
    """Bad or inconsistent configuration; the message is one line with the fix."""


class InvalidId(FFError, ValueError):
    """An id that does not parse; the message names the offending value."""


class ServerError(FFError):
    """The Valkey server is unreachable, too old, or misbehaving."""


class ReplicationTimeout(FFError):
    """`FF_DURABILITY=replicated`: fewer replicas than `FF_WAIT_REPLICAS` confirmed a write batch within
    `FF_WAIT_TIMEOUT_MS`. The primary applied it, but a failover now may lose it: treat it as not acknowledged
    (a worker does not start the handler of a claim that raised this)."""

    def __init__(self, acked: int, wanted: int, timeout_ms: int, node: str = "") -> None:
        self.acked, self.wanted, self.timeout_ms, self.node = acked, wanted, timeout_ms, node
        where = f" on {node}" if node else ""
        super().__init__(
            f"only {acked} of {wanted} replica(s){where} confirmed the write within {timeout_ms} ms: it is applied "
            "on the primary but may not survive a failover (check the replicas' link, or raise FF_WAIT_TIMEOUT_MS)")


class LibraryError(FFError):
    """The flowfabric function library could not be loaded or verified."""


class ScriptError(FFError):
    """A function replied `{0, code, details...}`.

    `code` is the contract's error code, `details` the extra reply elements (for example the stored
    terminal outcome and lease epoch of `execution_not_active`).
    """

    code: str = ""
    #: Upstream classification: terminal, retryable, informational, bug.
    kind: str = "terminal"

    def __init__(self, code: str, details: list[str] | None = None, function: str = "") -> None:
        self.code = code
        self.details = list(details or [])
        self.function = function
        extra = f" ({', '.join(self.details)})" if self.details else ""
        where = f"{function}: " if function else ""
        super().__init__(f"{where}{code}{extra}")

    @property
    def retryable(self) -> bool:
        return self.kind == "retryable"


_KINDS = {"T": "terminal", "R": "retryable", "I": "informational", "B": "bug", "-": "terminal"}

# Contract §6.1: code -> class letter.
_CODES: dict[str, str] = {
    "execution_not_found": "T", "execution_not_active": "T", "lease_revoked": "T", "lease_expired": "T",
    "stale_lease": "T", "no_active_lease": "I", "active_attempt_exists": "B",
    "use_claim_resumed_execution": "R", "not_a_resumed_execution": "R", "execution_not_leaseable": "R",
    "lease_conflict": "R", "invalid_claim_grant": "R", "claim_grant_expired": "R",
    "execution_not_reclaimable": "I", "max_retries_exhausted": "T", "execution_not_eligible": "I",
    "execution_not_in_eligible_set": "I", "grant_already_exists": "I", "capability_mismatch": "R",
    "invalid_capabilities": "T", "invalid_policy_json": "T", "invalid_input": "T",
    "invalid_lease_for_suspend": "T", "already_suspended": "I", "execution_not_suspended": "I",
    "waitpoint_not_found": "R", "waitpoint_not_pending": "I", "invalid_waitpoint_for_execution": "T",
    "pending_waitpoint_expired": "I", "waitpoint_not_token_bound": "T", "waitpoint_already_exists": "I",
    "waitpoint_not_open": "I", "waitpoint_closed": "I", "waitpoint_pending_use_buffer_script": "R",
    "target_not_signalable": "T", "signal_limit_exceeded": "T", "invalid_keys_missing_hmac": "-",
    "hmac_secret_not_initialized": "-", "invalid_secret": "-", "missing_token": "-", "invalid_token": "-",
    "token_expired": "-", "stream_closed": "T", "stale_owner_cannot_append": "T",
    "retention_limit_exceeded": "T", "invalid_kid": "T", "invalid_secret_hex": "T", "invalid_grace_ms": "T",
    "rotation_conflict": "T", "flow_not_found": "T", "flow_already_terminal": "T",
    "execution_not_in_flow": "T", "self_referencing_edge": "T", "stale_graph_revision": "R",
    "cycle_detected": "T", "dependency_already_exists": "T", "execution_already_in_flow": "T",
    "invalid_dependency": "T", "not_runnable": "T", "not_blocked_by_deps": "I", "terminal": "T",
    "deps_not_satisfied": "I", "execution_not_terminal": "T", "max_replays_exhausted": "T",
    "invalid_blocking_reason": "T", "invalid_tag_key": "T", "already_member_of_different_flow": "-",
}


def _class_name(code: str) -> str:
    return "".join(part.capitalize() for part in code.split("_"))


#: code -> exception class, e.g. ERRORS["stale_lease"] is StaleLease.
ERRORS: dict[str, type[ScriptError]] = {
    code: type(_class_name(code), (ScriptError,), {"code": code, "kind": _KINDS[letter]})
    for code, letter in _CODES.items()
}

ExecutionNotFound = ERRORS["execution_not_found"]
ExecutionNotActive = ERRORS["execution_not_active"]
LeaseRevoked = ERRORS["lease_revoked"]
LeaseExpired = ERRORS["lease_expired"]
StaleLease = ERRORS["stale_lease"]
InvalidInput = ERRORS["invalid_input"]
ExecutionNotTerminal = ERRORS["execution_not_terminal"]
ExecutionNotEligible = ERRORS["execution_not_eligible"]
MaxReplaysExhausted = ERRORS["max_replays_exhausted"]
CapabilityMismatch = ERRORS["capability_mismatch"]
UseClaimResumed = ERRORS["use_claim_resumed_execution"]


class BudgetNotFound(ScriptError):
    """Ours (the library has no existence check on budgets): no budget has this id."""

    code = "budget_not_found"


ERRORS["budget_not_found"] = BudgetNotFound  # ff_record_spend (ours) checks that the budget exists


def script_error(code: str, details: list[str], function: str = "") -> ScriptError:
    """Build the typed exception for a reply code (unknown codes get the base class)."""
    if code.startswith("already_member_of_different_flow:"):
        cls = ERRORS["already_member_of_different_flow"]
        return cls(code, [code.split(":", 1)[1], *details], function)
    cls = ERRORS.get(code, ScriptError)
    err = cls(code, details, function)
    return err
