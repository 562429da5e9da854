"""Execution policy (contract §7.1, operations §1.4): built in Python, stored verbatim as JSON in `E:policy`.

Unset optionals are omitted, never `null` (upstream's v0.2.0 nulls broke routing validation).

A policy given as a mapping (REST, JSON) is read field by field. Every field is either stored and acted on
where the engine has the behaviour, or refused with a `PolicyError` naming it — never dropped:

- honoured: `retry_policy` (with `retryable_categories` and exponential `jitter`, applied when a worker
  fails an attempt), `timeout_policy` (`attempt_timeout_ms`, `execution_deadline_ms` as a deadline from the
  create, `max_reclaim_count`), `max_reclaim_count`, `max_replay_count`, `budget_ids`, `quota_policy_id`,
  `routing_requirements.required_capabilities`, `dedup_window_ms` (the idempotency key's lifetime),
  `stream_policy` (`retention_maxlen` on every frame, `retention_ttl_ms` read by the retention trimmer,
  `durability_mode`), `suspension_policy` (`task.suspend`'s default timeout and timeout behaviour),
  `fallback_policy` (stored for the handler: upstream's engine does not act on it either);
- refused unless absent/`null` (or the one value we apply): `priority`, `delay_until`,
  `routing_requirements.preferred_locality` / `isolation_level`, `max_signals_per_execution` other than 10000;
- any other field is refused as unknown.

`null` reads as absent everywhere (upstream v0.2.0 serialised every unset optional as `null`). The list
and the reasons are in docs/deviations.md.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import InvalidId, ScriptError
from .errors import InvalidInput as _InvalidInput
from .ids import parse_budget_id, parse_quota_id, parse_uuid

if TYPE_CHECKING:
    class _InvalidInputBase(ScriptError):
        pass
else:
    _InvalidInputBase = _InvalidInput

#: The signal cap every delivery applies (deliver/buffer ARGV 17); the only value the policy may carry.
MAX_SIGNALS_PER_EXECUTION = 10_000
#: Lifetime of an idempotency key when the policy gives no `dedup_window_ms` (upstream's fixed 24 h).
DEFAULT_DEDUP_WINDOW_MS = 86_400_000
DURABILITY_MODES = ("buffered", "durable")


class PolicyError(_InvalidInputBase, ValueError):
    """A policy field that is malformed or that we cannot honour: `field` names it (`policy.a.b`).

    An `InvalidInput` (REST answers 400 with kind `invalid_input`) and a `ValueError`."""

    def __init__(self, field_name: str, message: str) -> None:
        self.field = field_name
        super().__init__("invalid_input", [f"{field_name} {message}"])


@dataclass(frozen=True)
class Backoff:
    kind: str = "exponential"  # "exponential" | "fixed"
    initial_delay_ms: int = 1000
    max_delay_ms: int = 60_000
    multiplier: float = 2.0
    delay_ms: int = 1000  # fixed
    #: Exponential only: each retry waits a random delay between half and all of the computed one.
    jitter: bool = False

    def as_json(self) -> dict[str, Any]:
        if self.kind == "fixed":
            return {"type": "fixed", "delay_ms": self.delay_ms}
        # The kind as given (not forced to exponential), so Policy's check refuses one it does not know.
        out: dict[str, Any] = {"type": self.kind, "initial_delay_ms": self.initial_delay_ms,
                               "max_delay_ms": self.max_delay_ms, "multiplier": self.multiplier}
        if self.jitter:
            out["jitter"] = True
        return out


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 3
    backoff: Backoff = field(default_factory=Backoff)
    #: Failure categories that may be retried; empty = every category (upstream's default).
    retryable_categories: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {"max_retries": self.max_retries, "backoff": self.backoff.as_json(),
                "retryable_categories": list(self.retryable_categories)}


@dataclass(frozen=True)
class StreamPolicy:
    durability_mode: str = "buffered"
    #: Frames kept per attempt stream (XADD MAXLEN = on every append).
    retention_maxlen: int = 10_000
    #: How long a finished execution is kept before the retention trimmer deletes it (None: its default).
    retention_ttl_ms: int | None = None

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"durability_mode": self.durability_mode, "retention_maxlen": self.retention_maxlen}
        if self.retention_ttl_ms is not None:
            out["retention_ttl_ms"] = self.retention_ttl_ms
        return out


@dataclass(frozen=True)
class SuspensionPolicy:
    """Defaults of `task.suspend` for this execution: the timeout when the call gives none, and what the
    timeout does when the call names no behaviour."""

    default_timeout_ms: int | None = None
    timeout_behavior: str = "fail"

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"timeout_behavior": self.timeout_behavior}
        if self.default_timeout_ms is not None:
            out["default_timeout_ms"] = self.default_timeout_ms
        return out


@dataclass(frozen=True)
class FallbackTier:
    provider: str
    model: str
    timeout_ms: int | None = None

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"provider": self.provider, "model": self.model}
        if self.timeout_ms is not None:
            out["timeout_ms"] = self.timeout_ms
        return out


@dataclass(frozen=True)
class Policy:
    retry: RetryPolicy | None = None
    attempt_timeout_ms: int | None = None
    #: The execution's whole lifetime from its create (operations §1.4 TimeoutPolicy): the create stores
    #: the deadline `now + execution_deadline_ms` and the execution-deadline scanner expires it then.
    execution_deadline_ms: int | None = None
    max_reclaim_count: int | None = None
    max_replay_count: int | None = None
    required_capabilities: tuple[str, ...] = ()
    #: Budgets charged by this execution (contract §7.1 `budget_ids`) and its quota policy (our extension
    #: field): the scheduler admits it only while none is exhausted (ffcore.budgets.admission).
    budget_ids: tuple[str, ...] = ()
    quota_policy_id: str | None = None
    #: Lifetime of the create's idempotency key (default 24 h).
    dedup_window_ms: int | None = None
    stream: StreamPolicy | None = None
    #: Provider/model tiers for the handler to walk (stored; the engine does not act on them).
    fallback_tiers: tuple[FallbackTier, ...] | None = None
    max_signals_per_execution: int | None = None
    suspension: SuspensionPolicy | None = None

    def __post_init__(self) -> None:
        # One validation whichever door builds a policy: the constructor checks its own JSON by the rules a
        # mapping (REST, schedules) is read with, so a field refused by name there is refused here too.
        try:
            doc = self.as_json()
        except InvalidId as e:
            bad = "policy.quota_policy_id" if "quota" in str(e) else "policy.budget_ids"
            raise PolicyError(bad, f"must be UUIDs ({e})") from None
        except (TypeError, ValueError, AttributeError) as e:
            raise PolicyError("policy", f"is malformed: {e}") from None
        _policy_fields(doc)

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.retry is not None:
            out["retry_policy"] = self.retry.as_json()
        timeouts = {k: v for k, v in (("attempt_timeout_ms", self.attempt_timeout_ms),
                                      ("execution_deadline_ms", self.execution_deadline_ms)) if v is not None}
        if timeouts:
            out["timeout_policy"] = timeouts
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
        if self.dedup_window_ms is not None:
            out["dedup_window_ms"] = self.dedup_window_ms
        if self.stream is not None:
            out["stream_policy"] = self.stream.as_json()
        if self.fallback_tiers is not None:
            out["fallback_policy"] = {"tiers": [t.as_json() for t in self.fallback_tiers]}
        if self.max_signals_per_execution is not None:
            out["max_signals_per_execution"] = self.max_signals_per_execution
        if self.suspension is not None:
            out["suspension_policy"] = self.suspension.as_json()
        return out

    def to_text(self) -> str:
        return json.dumps(self.as_json(), separators=(",", ":"), sort_keys=True)

    def create_args(self, deadline_at: int | None) -> dict[str, Any]:
        """The create's `deadline_at` and `dedup_ttl_ms` (create_execution keywords) under this policy."""
        return {"deadline_at": self.deadline_at(deadline_at),
                "dedup_ttl_ms": self.dedup_window_ms or DEFAULT_DEDUP_WINDOW_MS}

    def deadline_at(self, given: int | None, now_ms: int | None = None) -> int | None:
        """The create's execution deadline: the earlier of `given` and now + execution_deadline_ms."""
        if self.execution_deadline_ms is None:
            return given
        mine = (int(time.time() * 1000) if now_ms is None else now_ms) + self.execution_deadline_ms
        return mine if given is None else min(given, mine)


# ---------------------------------------------------------------- reading a mapping

_TOP = frozenset({"priority", "delay_until", "retry_policy", "timeout_policy", "max_reclaim_count",
                  "suspension_policy", "fallback_policy", "max_replay_count", "budget_ids", "quota_policy_id",
                  "routing_requirements", "dedup_window_ms", "stream_policy", "max_signals_per_execution"})
_REFUSED = {
    "delay_until": "is not read from the policy: give delay_until on the create",
}
#: Suspension timeout behaviours (contract §7.5).
TIMEOUT_BEHAVIORS = ("fail", "cancel", "expire", "auto_resume", "auto_resume_with_timeout_signal", "escalate")


def policy_from_mapping(data: dict[str, Any] | None) -> Policy:
    """A Policy from a plain dict (API/JSON input) with the contract's field names.

    Malformed values, fields we cannot honour and unknown fields raise `PolicyError` naming the field."""
    if data is None:
        return Policy()
    return Policy(**_policy_fields(data))


def _policy_fields(data: Any) -> dict[str, Any]:
    """Policy's keyword arguments read from a mapping, every rule checked (PolicyError names the field)."""
    if not isinstance(data, dict):
        raise PolicyError("policy", "must be an object")
    d = _present(data, "policy", _TOP)
    for name, why in _REFUSED.items():
        if name in d:
            raise PolicyError(f"policy.{name}", why)
    if "priority" in d and _int(d["priority"], "policy.priority", minimum=-(2**31)) != 0:
        raise PolicyError("policy.priority", "is not read from the policy: give priority on the create")
    msig = _opt_int(d.get("max_signals_per_execution"), "policy.max_signals_per_execution", minimum=1)
    if msig is not None and msig != MAX_SIGNALS_PER_EXECUTION:
        raise PolicyError("policy.max_signals_per_execution",
                          f"must be {MAX_SIGNALS_PER_EXECUTION}: every signal delivery applies that cap")
    tp = _object(d.get("timeout_policy"), "policy.timeout_policy",
                 {"attempt_timeout_ms", "execution_deadline_ms", "max_reclaim_count"})
    reclaim = _opt_int(d.get("max_reclaim_count"), "policy.max_reclaim_count")
    tp_reclaim = _opt_int(tp.get("max_reclaim_count"), "policy.timeout_policy.max_reclaim_count")
    if tp_reclaim is not None:  # the engine reads the top-level field (ff_reclaim_execution)
        if reclaim is not None and reclaim != tp_reclaim:
            raise PolicyError("policy.timeout_policy.max_reclaim_count", "disagrees with policy.max_reclaim_count")
        reclaim = tp_reclaim
    rr = _object(d.get("routing_requirements"), "policy.routing_requirements",
                 {"required_capabilities", "preferred_locality", "isolation_level"})
    for name in ("preferred_locality", "isolation_level"):
        if name in rr:
            raise PolicyError(f"policy.routing_requirements.{name}",
                              "is not supported: routing matches required_capabilities only")
    caps = rr.get("required_capabilities", [])
    if not isinstance(caps, list) or not all(isinstance(c, str) and c for c in caps):
        raise PolicyError("policy.routing_requirements.required_capabilities", "must be a list of non-empty strings")
    quota = d.get("quota_policy_id")
    if quota is not None and not isinstance(quota, str):
        raise PolicyError("policy.quota_policy_id", "must be a UUID string")
    return {
        "retry": _retry(d["retry_policy"]) if "retry_policy" in d else None,
        "attempt_timeout_ms": _opt_int(tp.get("attempt_timeout_ms"), "policy.timeout_policy.attempt_timeout_ms"),
        "execution_deadline_ms": _opt_int(tp.get("execution_deadline_ms"),
                                          "policy.timeout_policy.execution_deadline_ms", minimum=1),
        "max_reclaim_count": reclaim,
        "max_replay_count": _opt_int(d.get("max_replay_count"), "policy.max_replay_count"),
        "required_capabilities": tuple(caps),
        "budget_ids": tuple(_ids(d.get("budget_ids"), "policy.budget_ids")),
        "quota_policy_id": _ids(quota, "policy.quota_policy_id")[0] if quota else None,
        "dedup_window_ms": _opt_int(d.get("dedup_window_ms"), "policy.dedup_window_ms", minimum=1),
        "stream": _stream(d["stream_policy"]) if "stream_policy" in d else None,
        "fallback_tiers": _fallback(d["fallback_policy"]) if "fallback_policy" in d else None,
        "max_signals_per_execution": msig,
        "suspension": _suspension(d["suspension_policy"]) if "suspension_policy" in d else None,
    }


def _present(data: dict[str, Any], name: str, known: frozenset[str] | set[str]) -> dict[str, Any]:
    """`data` without its null fields; an unknown field raises PolicyError."""
    for k in data:
        if k not in known:
            raise PolicyError(f"{name}.{k}", f"is not a field of {name} (known: {', '.join(sorted(known))})")
    return {k: v for k, v in data.items() if v is not None}


def _object(v: Any, name: str, known: set[str]) -> dict[str, Any]:
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise PolicyError(name, "must be an object")
    return _present(v, name, known)


def _retry(v: Any) -> RetryPolicy:
    rp = _object(v, "policy.retry_policy", {"max_retries", "backoff", "retryable_categories"})
    name = "policy.retry_policy.backoff"
    raw = v.get("backoff") if isinstance(v, dict) else None
    if raw is not None and not isinstance(raw, dict):
        raise PolicyError(name, "must be an object")
    kind = (raw or {}).get("type") or "exponential"
    if kind == "fixed":
        b = _object(raw, name, {"type", "delay_ms"})
        backoff = Backoff(kind="fixed", delay_ms=_int(b.get("delay_ms", 1000), f"{name}.delay_ms"))
    elif kind == "exponential":
        b = _object(raw, name, {"type", "initial_delay_ms", "max_delay_ms", "multiplier", "jitter"})
        mult = b.get("multiplier", 2.0)
        if isinstance(mult, bool) or not isinstance(mult, int | float) or not math.isfinite(mult) or mult <= 0:
            raise PolicyError(f"{name}.multiplier", "must be a positive number")
        jitter = b.get("jitter", False)
        if not isinstance(jitter, bool):
            raise PolicyError(f"{name}.jitter", "must be true or false")
        backoff = Backoff(initial_delay_ms=_int(b.get("initial_delay_ms", 1000), f"{name}.initial_delay_ms"),
                          max_delay_ms=_int(b.get("max_delay_ms", 60_000), f"{name}.max_delay_ms"),
                          multiplier=float(mult), jitter=jitter)
    else:
        raise PolicyError(f"{name}.type", "must be exponential or fixed")
    cats = rp.get("retryable_categories", [])
    if not isinstance(cats, list) or not all(isinstance(c, str) and c for c in cats):
        raise PolicyError("policy.retry_policy.retryable_categories", "must be a list of non-empty strings")
    return RetryPolicy(max_retries=_int(rp.get("max_retries", 3), "policy.retry_policy.max_retries"),
                       backoff=backoff, retryable_categories=tuple(dict.fromkeys(cats)))


def _stream(v: Any) -> StreamPolicy:
    name = "policy.stream_policy"
    sp = _object(v, name, {"durability_mode", "retention_maxlen", "retention_ttl_ms"})
    mode = sp.get("durability_mode", "buffered")
    if mode not in DURABILITY_MODES:
        raise PolicyError(f"{name}.durability_mode", f"must be one of {', '.join(DURABILITY_MODES)}")
    return StreamPolicy(durability_mode=mode,
                        retention_maxlen=_int(sp.get("retention_maxlen", 10_000), f"{name}.retention_maxlen",
                                              minimum=1),
                        retention_ttl_ms=_opt_int(sp.get("retention_ttl_ms"), f"{name}.retention_ttl_ms", minimum=1))


def _suspension(v: Any) -> SuspensionPolicy:
    name = "policy.suspension_policy"
    sp = _object(v, name, {"default_timeout_ms", "timeout_behavior"})
    behavior = sp.get("timeout_behavior", "fail")
    if behavior not in TIMEOUT_BEHAVIORS:
        raise PolicyError(f"{name}.timeout_behavior", f"must be one of {', '.join(TIMEOUT_BEHAVIORS)}")
    return SuspensionPolicy(_opt_int(sp.get("default_timeout_ms"), f"{name}.default_timeout_ms", minimum=1),
                            behavior)


def _fallback(v: Any) -> tuple[FallbackTier, ...]:
    fp = _object(v, "policy.fallback_policy", {"tiers"})
    tiers = fp.get("tiers", [])
    if not isinstance(tiers, list):
        raise PolicyError("policy.fallback_policy.tiers", "must be a list")
    out = []
    for i, t in enumerate(tiers):
        name = f"policy.fallback_policy.tiers.{i}"
        tier = _object(t, name, {"provider", "model", "timeout_ms"})
        for part in ("provider", "model"):
            if not isinstance(tier.get(part), str) or not tier[part]:
                raise PolicyError(f"{name}.{part}", "must be a non-empty string")
        timeout = _opt_int(tier.get("timeout_ms"), f"{name}.timeout_ms")
        out.append(FallbackTier(tier["provider"], tier["model"], timeout))
    return tuple(out)


def _ids(v: Any, name: str) -> list[str]:
    """A UUID or a list of UUIDs (budget / quota ids); bad shapes raise PolicyError."""
    items = v if isinstance(v, list) else [] if v is None else [v]
    try:
        return [parse_uuid(x, name) for x in items]
    except InvalidId as e:
        raise PolicyError(name, f"must be UUIDs ({e})") from None


def _int(v: Any, name: str, minimum: int = 0) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum or v > 2**53 - 1:
        raise PolicyError(name, "must be a non-negative integer" if minimum == 0 else
                          f"must be an integer of at least {minimum}")
    return v


def _opt_int(v: Any, name: str, minimum: int = 0) -> int | None:
    return None if v is None else _int(v, name, minimum)


# ---------------------------------------------------------------- reading the stored policy

def parse_stored_policy(text: str) -> dict[str, Any]:
    """The stored `E:policy` JSON as a dict ({} when absent or unreadable)."""
    try:
        v = json.loads(text) if text else {}
    except ValueError:
        return {}
    return v if isinstance(v, dict) else {}


def retry_json_for_failure(policy: dict[str, Any], category: str, retry_count: Callable[[], int],
                           rng: random.Random | None = None) -> str:
    """The retry policy JSON a failed attempt sends to ff_fail_execution (ARGV 7; "" = no retry).

    A failure whose category is not in a non-empty `retryable_categories` is not retried. With exponential
    `jitter` the delay the library would compute, min(initial × multiplier^retry_count, max), is drawn
    uniformly from its upper half here and sent as a fixed backoff (`retry_count` is read only then).
    """
    retry = policy.get("retry_policy")
    if not isinstance(retry, dict):
        return ""
    cats = retry.get("retryable_categories")
    if isinstance(cats, list) and cats and category not in cats:
        return ""
    b = retry.get("backoff")
    if isinstance(b, dict) and b.get("jitter") is True and b.get("type", "exponential") == "exponential":
        try:
            full = min(float(b.get("initial_delay_ms", 1000)) * float(b.get("multiplier", 2.0)) ** retry_count(),
                       float(b.get("max_delay_ms", 60_000)))
        except OverflowError:
            full = float(b.get("max_delay_ms", 60_000))
        whole = int(full)
        delay = whole - (rng or random).randint(0, whole // 2)
        retry = {**retry, "backoff": {"type": "fixed", "delay_ms": delay}}
    return json.dumps(retry, separators=(",", ":"))


def suspend_defaults(policy: dict[str, Any], args: tuple[Any, ...], kw: dict[str, Any]) -> dict[str, Any]:
    """`task.suspend`'s keyword arguments with the stored `suspension_policy` filling in what the call left
    out (`args` are its positional ones: conditions, timeout_ms, timeout_behavior)."""
    sp = policy.get("suspension_policy")
    if not isinstance(sp, dict):
        return kw
    out = dict(kw)
    timeout = sp.get("default_timeout_ms")
    if len(args) < 2 and "timeout_ms" not in kw and "timeout_at" not in kw and isinstance(timeout, int) \
            and not isinstance(timeout, bool) and timeout > 0:
        out["timeout_ms"] = timeout
    behavior = sp.get("timeout_behavior")
    if len(args) < 3 and "timeout_behavior" not in kw and behavior in TIMEOUT_BEHAVIORS:
        out["timeout_behavior"] = behavior
    return out


def stream_retention_maxlen(policy: dict[str, Any]) -> int | None:
    """The policy's `stream_policy.retention_maxlen` (None when unset)."""
    sp = policy.get("stream_policy")
    v = sp.get("retention_maxlen") if isinstance(sp, dict) else None
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None
