"""derive_public_state: one row per case of the derivation."""

import pytest

from ffcore.state import (
    EligibilityState as E,
)
from ffcore.state import (
    LifecyclePhase as L,
)
from ffcore.state import (
    PublicState as P,
)
from ffcore.state import (
    StateVector,
    derive_public_state,
    expected_lane_index,
)
from ffcore.state import (
    TerminalOutcome as T,
)

ROWS = [
    (L.TERMINAL, E.NOT_APPLICABLE, T.SUCCESS, P.COMPLETED),
    (L.TERMINAL, E.NOT_APPLICABLE, T.FAILED, P.FAILED),
    (L.TERMINAL, E.NOT_APPLICABLE, T.CANCELLED, P.CANCELLED),
    (L.TERMINAL, E.NOT_APPLICABLE, T.EXPIRED, P.EXPIRED),
    (L.TERMINAL, E.NOT_APPLICABLE, T.SKIPPED, P.SKIPPED),
    (L.TERMINAL, E.NOT_APPLICABLE, T.NONE, P.FAILED),
    (L.SUSPENDED, E.NOT_APPLICABLE, T.NONE, P.SUSPENDED),
    (L.ACTIVE, E.NOT_APPLICABLE, T.NONE, P.ACTIVE),
    (L.RUNNABLE, E.ELIGIBLE_NOW, T.NONE, P.WAITING),
    (L.RUNNABLE, E.NOT_ELIGIBLE_UNTIL_TIME, T.NONE, P.DELAYED),
    (L.RUNNABLE, E.BLOCKED_BY_DEPENDENCIES, T.NONE, P.WAITING_CHILDREN),
    (L.RUNNABLE, E.BLOCKED_BY_BUDGET, T.NONE, P.RATE_LIMITED),
    (L.RUNNABLE, E.BLOCKED_BY_QUOTA, T.NONE, P.RATE_LIMITED),
    (L.RUNNABLE, E.BLOCKED_BY_ROUTE, T.NONE, P.WAITING),
    (L.RUNNABLE, E.BLOCKED_BY_LANE_STATE, T.NONE, P.WAITING),
    (L.RUNNABLE, E.BLOCKED_BY_OPERATOR, T.NONE, P.WAITING),
    (L.RUNNABLE, E.NOT_APPLICABLE, T.NONE, P.WAITING),
    (L.SUBMITTED, E.NOT_APPLICABLE, T.NONE, P.WAITING),
]


@pytest.mark.parametrize(("lifecycle", "eligibility", "outcome", "expected"), ROWS)
def test_derive_public_state(lifecycle, eligibility, outcome, expected):
    assert derive_public_state(lifecycle, eligibility, outcome) is expected


def test_every_enum_string_is_exact():
    assert [p.value for p in P] == ["waiting", "delayed", "rate_limited", "waiting_children", "active", "suspended",
                                    "completed", "failed", "cancelled", "expired", "skipped"]
    assert E.NOT_ELIGIBLE_UNTIL_TIME == "not_eligible_until_time"


def test_state_vector_parses_a_core_hash_and_rejects_unknown_values():
    core = {"lifecycle_phase": "runnable", "ownership_state": "unowned", "eligibility_state": "eligible_now",
            "blocking_reason": "waiting_for_worker", "terminal_outcome": "none",
            "attempt_state": "pending_first_attempt", "public_state": "waiting"}
    sv = StateVector.from_core(core)
    assert sv.is_consistent
    assert sv.derived_public_state is P.WAITING
    with pytest.raises(ValueError):
        StateVector.from_core({**core, "public_state": "bogus"})
    assert not StateVector.from_core({**core, "public_state": "active"}).is_consistent


def test_expected_lane_index():
    assert expected_lane_index(L.RUNNABLE, E.ELIGIBLE_NOW) == "eligible"
    assert expected_lane_index(L.RUNNABLE, E.BLOCKED_BY_OPERATOR) == "blocked:operator"
    assert expected_lane_index(L.ACTIVE, E.NOT_APPLICABLE) == "active"
    assert expected_lane_index(L.TERMINAL, E.NOT_APPLICABLE) == "terminal"
