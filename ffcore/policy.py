"""Execution policy (contract §7.1): built in Python, stored verbatim as JSON in `E:policy`.

Unset optionals are omitted, never `null` (upstream's v0.2.0 nulls broke routing validation).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .errors import InvalidId, InvalidInput
from .ids import parse_budget_id, parse_quota_id, parse_uuid


@dataclass(frozen=True)
class Backoff:
    kind: str = "exponential"  # "exponential" | "fixed"
    initial_delay_ms: int = 1000
    max_delay_ms: int = 60_000
    multiplier: float = 2.0
    delay_ms: int = 1000  # fixed

    def as_json(self) -> dict[str, Any]:
        if self.kind == "fixed":
            return {"type": "fixed", "delay_ms": self.delay_ms}
        return {"type": "exponential", "initial_delay_ms": self.initial_delay_ms, "max_delay_ms": self.max_delay_ms,
                "multiplier": self.multiplier}


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 3
    backoff: Backoff = field(default_factory=Backoff)

    def as_json(self) -> dict[str, Any]:
        return {"max_retries": self.max_retries, "backoff": self.backoff.as_json(), "retryable_categories": []}


@dataclass(frozen=True)
class Policy:
    retry: RetryPolicy | None = None
    attempt_timeout_ms: int | None = None
    max_reclaim_count: int | None = None
    max_replay_count: int | None = None
    required_capabilities: tuple[str, ...] = ()
    #: Budgets charged by this execution (contract §7.1 `budget_ids`) and its quota policy (our extension
    #: field): the scheduler admits it only while none is exhausted (ffcore.budgets.admission).
    budget_ids: tuple[str, ...] = ()
    quota_policy_id: str | None = None

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.retry is not None:
            out["retry_policy"] = self.retry.as_json()
        if self.attempt_timeout_ms is not None:
            out["timeout_policy"] = {"attempt_timeout_ms": self.attempt_timeout_ms}
        if self.max_reclaim_count is not None:
            out["max_reclaim_count"] = self.max_reclaim_count
        if self.max_replay_count is not None:
            out["max_replay_count"] = self.max_replay_count
        if self.required_capabilities:
            out["routing_requirements"] = {"required_capabilities": sorted(set(self.required_capabilities))}
        if self.budget_ids:
            out["budget_ids"] = list(dict.fromkeys(parse_budget_id(b) for b in self.budget_ids))
        if self.quota_policy_id:
            out["quota_policy_id"] = parse_quota_id(self.quota_policy_id)
        return out

    def to_text(self) -> str:
        return json.dumps(self.as_json(), separators=(",", ":"), sort_keys=True)


def policy_from_mapping(data: dict[str, Any] | None) -> Policy:
    """Accept a plain dict (API/JSON input) with the contract's field names; bad shapes raise InvalidInput."""
    if not data:
        return Policy()
    if not isinstance(data, dict):
        raise InvalidInput("invalid_input", ["policy must be an object"])
    retry = None
    rp = data.get("retry_policy")
    if rp is not None:
        if not isinstance(rp, dict):
            raise InvalidInput("invalid_input", ["policy.retry_policy must be an object"])
        b = rp.get("backoff") or {}
        if not isinstance(b, dict):
            raise InvalidInput("invalid_input", ["policy.retry_policy.backoff must be an object"])
        kind = b.get("type", "exponential")
        if kind not in ("exponential", "fixed"):
            raise InvalidInput("invalid_input", ["policy.retry_policy.backoff.type must be exponential or fixed"])
        retry = RetryPolicy(
            max_retries=_nonneg(rp.get("max_retries", 3), "policy.retry_policy.max_retries"),
            backoff=Backoff(
                kind=kind,
                initial_delay_ms=_nonneg(b.get("initial_delay_ms", 1000), "backoff.initial_delay_ms"),
                max_delay_ms=_nonneg(b.get("max_delay_ms", 60_000), "backoff.max_delay_ms"),
                multiplier=float(b.get("multiplier", 2.0)),
                delay_ms=_nonneg(b.get("delay_ms", 1000), "backoff.delay_ms"),
            ),
        )
    tp = data.get("timeout_policy") or {}
    rr = data.get("routing_requirements") or {}
    caps = rr.get("required_capabilities") or [] if isinstance(rr, dict) else []
    if not isinstance(caps, list) or not all(isinstance(c, str) for c in caps):
        raise InvalidInput("invalid_input", ["policy.routing_requirements.required_capabilities must be strings"])
    ato = tp.get("attempt_timeout_ms") if isinstance(tp, dict) else None
    return Policy(
        retry=retry,
        attempt_timeout_ms=None if ato is None else _nonneg(ato, "policy.timeout_policy.attempt_timeout_ms"),
        max_reclaim_count=_opt_nonneg(data.get("max_reclaim_count"), "policy.max_reclaim_count"),
        max_replay_count=_opt_nonneg(data.get("max_replay_count"), "policy.max_replay_count"),
        required_capabilities=tuple(caps),
        budget_ids=tuple(_ids(data.get("budget_ids"), "policy.budget_ids")),
        quota_policy_id=_ids(data.get("quota_policy_id"), "policy.quota_policy_id")[0] or None
        if data.get("quota_policy_id") else None,
    )


def _ids(v: Any, name: str) -> list[str]:
    """A UUID or a list of UUIDs (budget / quota ids); bad shapes raise InvalidInput."""
    items = v if isinstance(v, list) else [] if v is None else [v]
    try:
        return [parse_uuid(x, name) for x in items]
    except InvalidId as e:
        raise InvalidInput("invalid_input", [str(e)]) from None


def _nonneg(v: Any, name: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise InvalidInput("invalid_input", [f"{name} must be a non-negative integer"])
    return v


def _opt_nonneg(v: Any, name: str) -> int | None:
    return None if v is None else _nonneg(v, name)


def parse_stored_policy(text: str) -> dict[str, Any]:
    """The stored `E:policy` JSON as a dict ({} when absent or unreadable)."""
    try:
        v = json.loads(text) if text else {}
    except ValueError:
        return {}
    return v if isinstance(v, dict) else {}
