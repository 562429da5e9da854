"""A schedule as stored (`ff:sched:{fp:N}:<id>`, one hash) and the checks its input goes through."""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass, field
from typing import Any

from ffcore.errors import InvalidId, InvalidInput
from ffcore.policy import Policy, policy_from_mapping

from .errors import ScheduleInvalid
from .spec import Spec

OVERLAPS = ("allow", "skip", "cancel_previous")
#: Default catch-up after downtime: run the latest missed fire once (0 = "skip": none).
DEFAULT_CATCHUP = 1
MAX_CATCHUP = 1000
_ID = re.compile(r"^sch-(\d{1,5})-([0-9a-f]{16})\Z")
# `\Z`, not `$`: `$` also matches before a final newline, which let "name\n" through.
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._-]{0,99}\Z")


def mint_id(partition: int) -> str:
    return f"sch-{partition}-{secrets.token_hex(8)}"


def partition_of(schedule_id: str) -> int:
    m = _ID.match(schedule_id or "")
    if not m:
        raise InvalidId(f"not a schedule id: {schedule_id!r} (expected sch-<partition>-<16 hex>)")
    return int(m.group(1))


@dataclass(frozen=True)
class Template:
    """What each fire creates: `create()`'s arguments (the namespace is the schedule's)."""

    kind: str
    lane: str = "default"
    payload: str = ""
    priority: int = 0
    tags: dict[str, str] = field(default_factory=dict)
    policy: dict[str, Any] = field(default_factory=dict)

    def policy_object(self) -> Policy | None:
        return policy_from_mapping(self.policy) if self.policy else None

    def to_json(self) -> str:
        return json.dumps({"kind": self.kind, "lane": self.lane, "payload": self.payload, "priority": self.priority,
                           "tags": self.tags, "policy": self.policy}, separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Template:
        d = json.loads(text or "{}")
        return cls(d.get("kind", ""), d.get("lane", "default"), d.get("payload", ""), int(d.get("priority", 0)),
                   dict(d.get("tags") or {}), dict(d.get("policy") or {}))


def check_template(t: Template, create_call: Any) -> None:
    """Refuse what `create()` would refuse, naming the template field (`create_call` builds without running)."""
    if not isinstance(t.kind, str) or not t.kind.strip():
        raise ScheduleInvalid("template.kind", "must not be empty")
    if isinstance(t.priority, bool) or not isinstance(t.priority, int):
        raise ScheduleInvalid("template.priority", f"must be an integer, got {type(t.priority).__name__}")
    if not isinstance(t.payload, str):
        raise ScheduleInvalid("template.payload", "must be text")
    if not isinstance(t.policy, dict):
        raise ScheduleInvalid("template.policy", "must be an object")
    try:
        policy = t.policy_object()
    except (InvalidInput, InvalidId, ValueError, TypeError, KeyError, AttributeError) as e:
        raise ScheduleInvalid("template.policy", _detail(e)) from None
    try:
        create_call(kind=t.kind, lane=t.lane, payload=t.payload, priority=t.priority, tags=t.tags, policy=policy)
    except (InvalidInput, InvalidId, ValueError, TypeError) as e:
        text = _detail(e)
        name = next((f for f in ("lane", "priority", "tags", "kind", "payload") if text.startswith(f)), "")
        raise ScheduleInvalid(f"template.{name}" if name else "template", text) from None


def _detail(e: Exception) -> str:
    details = getattr(e, "details", None)
    return "; ".join(details) if details else str(e)


def check_name(name: Any) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise ScheduleInvalid("name", "1-100 letters, digits, spaces, dots, dashes or underscores, "
                                      "starting with a letter or digit")
    return name


def check_overlap(overlap: Any) -> str:
    if overlap not in OVERLAPS:
        raise ScheduleInvalid("overlap", f"must be one of {', '.join(OVERLAPS)}")
    return str(overlap)


#: Catch-up as text (CLI, forms): ASCII digits only — str.isdigit() also takes "²" and "١٢".
_CATCHUP_TEXT = re.compile(r"[0-9]{1,4}\Z")
_CATCHUP_WORDS = f'must be "skip" or a whole number of missed fires from 0 to {MAX_CATCHUP}'


def check_catchup(catchup: Any) -> int:
    """"skip" or 0 = no missed fire runs; N = the latest N missed fires run. A JSON true is not 1."""
    if catchup == "skip":
        return 0
    if isinstance(catchup, str):
        if not _CATCHUP_TEXT.match(catchup):
            raise ScheduleInvalid("catchup", f"{_CATCHUP_WORDS} (digits 0-9), got {catchup!r}")
        catchup = int(catchup)
    if isinstance(catchup, bool) or not isinstance(catchup, int):
        raise ScheduleInvalid("catchup", f"{_CATCHUP_WORDS}, got {type(catchup).__name__}")
    if not 0 <= catchup <= MAX_CATCHUP:
        raise ScheduleInvalid("catchup", f"{_CATCHUP_WORDS}, got {catchup}")
    return catchup


def check_paused(paused: Any) -> bool:
    if not isinstance(paused, bool):
        raise ScheduleInvalid("paused", f"must be true or false, got {type(paused).__name__}")
    return paused


#: The operator actions each state offers (delete and trigger always; pause only when active, resume when paused).
def actions_for(s: Schedule) -> tuple[str, ...]:
    return ("resume", "trigger", "delete") if s.paused else ("pause", "trigger", "delete")


@dataclass(frozen=True)
class Schedule:
    id: str
    namespace: str
    name: str
    spec: Spec
    template: Template
    overlap: str
    catchup: int
    paused: bool
    next_fire_at: int | None
    version: str
    created_at: int
    created_by: str
    updated_at: int
    updated_by: str
    last_fire_at: int | None = None
    last_eid: str = ""
    fires: int = 0
    skipped: int = 0
    missed: int = 0

    @property
    def partition(self) -> int:
        return partition_of(self.id)

    @property
    def description(self) -> str:
        return self.spec.describe()

    @property
    def catchup_text(self) -> str:
        return "skip" if self.catchup == 0 else str(self.catchup)

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id, "namespace": self.namespace, "name": self.name,
            "spec": {"cron": self.spec.cron, "timezone": self.spec.timezone, "interval_ms": self.spec.interval_ms},
            "description": self.description,
            "template": json.loads(self.template.to_json()), "overlap": self.overlap,
            "catchup": self.catchup_text, "paused": self.paused, "next_fire_at": self.next_fire_at,
            "version": int(self.version or 0), "created_at": self.created_at, "created_by": self.created_by,
            "updated_at": self.updated_at, "updated_by": self.updated_by, "last_fire_at": self.last_fire_at,
            "last_execution_id": self.last_eid or None, "fires": self.fires, "skipped": self.skipped,
            "missed": self.missed,
        }

    @classmethod
    def from_hash(cls, f: dict[str, str]) -> Schedule:
        def num(name: str) -> int:
            return int(f.get(name) or 0)

        return cls(
            id=f["id"], namespace=f.get("namespace", "default"), name=f.get("name", ""), spec=Spec.from_fields(f),
            template=Template.from_json(f.get("template", "{}")), overlap=f.get("overlap", "allow"),
            catchup=num("catchup"), paused=f.get("paused") == "1",
            next_fire_at=int(f["next_fire_at"]) if f.get("next_fire_at") else None, version=f.get("version", "0"),
            created_at=num("created_at"), created_by=f.get("created_by", ""), updated_at=num("updated_at"),
            updated_by=f.get("updated_by", ""),
            last_fire_at=int(f["last_fire_at"]) if f.get("last_fire_at") else None, last_eid=f.get("last_eid", ""),
            fires=num("fires"), skipped=num("skipped"), missed=num("missed"),
        )


@dataclass(frozen=True)
class Run:
    """One record of S:runs: a fire (fired / triggered / skipped) or a count of missed fire times."""

    fire_at: int
    outcome: str
    execution_id: str = ""
    missed: int = 0
    #: The execution's public state now (read alongside), "" when none.
    state: str = ""

    @classmethod
    def parse(cls, member: str) -> Run:
        at, outcome, rest = (member.split("|", 2) + ["", ""])[:3]
        if outcome == "missed":
            return cls(int(at), outcome, "", int(rest or 0))
        return cls(int(at), outcome, rest)
