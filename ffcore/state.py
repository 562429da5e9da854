"""The 7-dimension state vector (contract §4.2) and the public-state derivation."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum


class LifecyclePhase(StrEnum):
    SUBMITTED = "submitted"
    RUNNABLE = "runnable"
    ACTIVE = "active"
    SUSPENDED = "suspended"
    TERMINAL = "terminal"


class OwnershipState(StrEnum):
    UNOWNED = "unowned"
    LEASED = "leased"
    LEASE_EXPIRED_RECLAIMABLE = "lease_expired_reclaimable"
    LEASE_REVOKED = "lease_revoked"


class EligibilityState(StrEnum):
    ELIGIBLE_NOW = "eligible_now"
    NOT_ELIGIBLE_UNTIL_TIME = "not_eligible_until_time"
    BLOCKED_BY_DEPENDENCIES = "blocked_by_dependencies"
    BLOCKED_BY_BUDGET = "blocked_by_budget"
    BLOCKED_BY_QUOTA = "blocked_by_quota"
    BLOCKED_BY_ROUTE = "blocked_by_route"
    BLOCKED_BY_LANE_STATE = "blocked_by_lane_state"
    BLOCKED_BY_OPERATOR = "blocked_by_operator"
    NOT_APPLICABLE = "not_applicable"


class BlockingReason(StrEnum):
    NONE = "none"
    WAITING_FOR_WORKER = "waiting_for_worker"
    WAITING_FOR_RETRY_BACKOFF = "waiting_for_retry_backoff"
    WAITING_FOR_RESUME_DELAY = "waiting_for_resume_delay"
    WAITING_FOR_DELAY = "waiting_for_delay"
    WAITING_FOR_SIGNAL = "waiting_for_signal"
    WAITING_FOR_APPROVAL = "waiting_for_approval"
    WAITING_FOR_CALLBACK = "waiting_for_callback"
    WAITING_FOR_TOOL_RESULT = "waiting_for_tool_result"
    WAITING_FOR_CHILDREN = "waiting_for_children"
    WAITING_FOR_BUDGET = "waiting_for_budget"
    WAITING_FOR_QUOTA = "waiting_for_quota"
    WAITING_FOR_CAPABLE_WORKER = "waiting_for_capable_worker"
    WAITING_FOR_LOCALITY_MATCH = "waiting_for_locality_match"
    PAUSED_BY_OPERATOR = "paused_by_operator"
    PAUSED_BY_POLICY = "paused_by_policy"
    PAUSED_BY_FLOW_CANCEL = "paused_by_flow_cancel"


class TerminalOutcome(StrEnum):
    NONE = "none"
    SUCCESS = "success"
    FAILED = "failed"
    CANCELLED = "cancelled"
    EXPIRED = "expired"
    SKIPPED = "skipped"


class AttemptState(StrEnum):
    NONE = "none"
    PENDING_FIRST_ATTEMPT = "pending_first_attempt"
    RUNNING_ATTEMPT = "running_attempt"
    ATTEMPT_INTERRUPTED = "attempt_interrupted"
    PENDING_RETRY_ATTEMPT = "pending_retry_attempt"
    PENDING_REPLAY_ATTEMPT = "pending_replay_attempt"
    ATTEMPT_TERMINAL = "attempt_terminal"


class PublicState(StrEnum):
    WAITING = "waiting"
    DELAYED = "delayed"
    RATE_LIMITED = "rate_limited"
    WAITING_CHILDREN = "waiting_children"
    ACTIVE = "active"
    SUSPENDED = "suspended"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    EXPIRED = "expired"
    SKIPPED = "skipped"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_PUBLIC_STATES


TERMINAL_PUBLIC_STATES = frozenset(
    {PublicState.COMPLETED, PublicState.FAILED, PublicState.CANCELLED, PublicState.EXPIRED, PublicState.SKIPPED}
)

_BY_OUTCOME = {
    TerminalOutcome.SUCCESS: PublicState.COMPLETED,
    TerminalOutcome.FAILED: PublicState.FAILED,
    TerminalOutcome.CANCELLED: PublicState.CANCELLED,
    TerminalOutcome.EXPIRED: PublicState.EXPIRED,
    TerminalOutcome.SKIPPED: PublicState.SKIPPED,
    TerminalOutcome.NONE: PublicState.FAILED,  # corruption fallback
}

_BY_ELIGIBILITY = {
    EligibilityState.ELIGIBLE_NOW: PublicState.WAITING,
    EligibilityState.NOT_ELIGIBLE_UNTIL_TIME: PublicState.DELAYED,
    EligibilityState.BLOCKED_BY_DEPENDENCIES: PublicState.WAITING_CHILDREN,
    EligibilityState.BLOCKED_BY_BUDGET: PublicState.RATE_LIMITED,
    EligibilityState.BLOCKED_BY_QUOTA: PublicState.RATE_LIMITED,
    EligibilityState.BLOCKED_BY_ROUTE: PublicState.WAITING,
    EligibilityState.BLOCKED_BY_LANE_STATE: PublicState.WAITING,
    EligibilityState.BLOCKED_BY_OPERATOR: PublicState.WAITING,
    EligibilityState.NOT_APPLICABLE: PublicState.WAITING,
}


def derive_public_state(
    lifecycle: LifecyclePhase, eligibility: EligibilityState, outcome: TerminalOutcome
) -> PublicState:
    """The user-facing state implied by the vector (upstream state.rs semantics).

    Note: `ff_block_execution_for_admission` stores `rate_limited` for every block reason, so a
    route/operator block stored by the library differs from this derivation (a known upstream quirk).
    """
    if lifecycle is LifecyclePhase.TERMINAL:
        return _BY_OUTCOME[outcome]
    if lifecycle is LifecyclePhase.SUSPENDED:
        return PublicState.SUSPENDED
    if lifecycle is LifecyclePhase.ACTIVE:
        return PublicState.ACTIVE
    if lifecycle is LifecyclePhase.RUNNABLE:
        return _BY_ELIGIBILITY[eligibility]
    return PublicState.WAITING


@dataclass(frozen=True)
class StateVector:
    lifecycle_phase: LifecyclePhase
    ownership_state: OwnershipState
    eligibility_state: EligibilityState
    blocking_reason: BlockingReason
    terminal_outcome: TerminalOutcome
    attempt_state: AttemptState
    public_state: PublicState
    blocking_detail: str = ""

    @classmethod
    def from_core(cls, core: Mapping[str, str]) -> StateVector:
        """Parse the vector from an `E:core` mapping; unknown or empty values raise ValueError."""
        return cls(
            lifecycle_phase=LifecyclePhase(core.get("lifecycle_phase", "")),
            ownership_state=OwnershipState(core.get("ownership_state", "")),
            eligibility_state=EligibilityState(core.get("eligibility_state", "")),
            blocking_reason=BlockingReason(core.get("blocking_reason", "")),
            terminal_outcome=TerminalOutcome(core.get("terminal_outcome", "")),
            attempt_state=AttemptState(core.get("attempt_state", "")),
            public_state=PublicState(core.get("public_state", "")),
            blocking_detail=core.get("blocking_detail", ""),
        )

    @property
    def derived_public_state(self) -> PublicState:
        return derive_public_state(self.lifecycle_phase, self.eligibility_state, self.terminal_outcome)

    @property
    def is_consistent(self) -> bool:
        """The stored public state equals the derived one (admission blocks store rate_limited)."""
        if self.public_state is self.derived_public_state:
            return True
        return (
            self.public_state is PublicState.RATE_LIMITED
            and self.lifecycle_phase is LifecyclePhase.RUNNABLE
            and self.eligibility_state.value.startswith("blocked_by_")
        )

    def as_dict(self) -> dict[str, str]:
        return {
            "lifecycle_phase": self.lifecycle_phase.value,
            "ownership_state": self.ownership_state.value,
            "eligibility_state": self.eligibility_state.value,
            "blocking_reason": self.blocking_reason.value,
            "terminal_outcome": self.terminal_outcome.value,
            "attempt_state": self.attempt_state.value,
            "public_state": self.public_state.value,
        }


#: Which lane index an execution sits in, by (lifecycle, eligibility); None = no lane index.
def expected_lane_index(lifecycle: LifecyclePhase, eligibility: EligibilityState) -> str | None:
    if lifecycle is LifecyclePhase.TERMINAL:
        return "terminal"
    if lifecycle is LifecyclePhase.ACTIVE:
        return "active"
    if lifecycle is LifecyclePhase.SUSPENDED:
        return "suspended"
    if lifecycle is LifecyclePhase.RUNNABLE:
        return {
            EligibilityState.ELIGIBLE_NOW: "eligible",
            EligibilityState.NOT_ELIGIBLE_UNTIL_TIME: "delayed",
            EligibilityState.BLOCKED_BY_DEPENDENCIES: "blocked:dependencies",
            EligibilityState.BLOCKED_BY_BUDGET: "blocked:budget",
            EligibilityState.BLOCKED_BY_QUOTA: "blocked:quota",
            EligibilityState.BLOCKED_BY_ROUTE: "blocked:route",
            EligibilityState.BLOCKED_BY_OPERATOR: "blocked:operator",
        }.get(eligibility)
    return None
