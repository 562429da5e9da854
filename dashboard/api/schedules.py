"""Recurring schedules (#26; ours): CRUD on /v1/schedules plus the POST sub-routes `:pause`, `:resume`,
`:trigger`. Every write needs a reason and leaves an audit entry; refusals name the field."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Query, Router, Schema, Status
from pydantic import Field

from ffcore.execution.client import Client
from ffcore.schedules import Schedule, ScheduleConflict, ScheduleInvalid, ScheduleNotFound, state_refusal

from .. import audit_trail
from ..backend import get_backend
from .audited import audited
from .errors import NotFound
from .schemas import Error

router = Router(tags=["schedules"])

WHY = Field(min_length=1, max_length=1000, description="Why (required); kept in the audit trail")
# Numbers and flags are typed `Any` here on purpose: pydantic would turn `true` into 1 and "1000" into 1000;
# ffcore's checks (shared with the CLI and the page) take them as sent and answer a 400 naming the field.
_INT = {"type": "integer"}


class FieldError(Schema):
    field: str
    message: str


class ScheduleError(Schema):
    error: str
    kind: str | None = None
    retryable: bool | None = None
    fields: list[FieldError] | None = None


class SpecIn(Schema):
    cron: str | None = Field(default=None, max_length=200, description="5-field cron, in `timezone`")
    timezone: str | None = Field(default=None, max_length=64, description="IANA zone (default UTC)")
    interval_ms: Any = Field(default=None, description="fixed interval, >= 1000 (an integer)", json_schema_extra=_INT)


class TemplateIn(Schema):
    kind: str = Field(max_length=256)
    lane: str = Field(default="default", max_length=256)
    payload: str = Field(default="", max_length=1_000_000)
    priority: Any = Field(default=0, description="an integer", json_schema_extra=_INT)
    tags: dict[str, str] = Field(default_factory=dict)
    policy: dict[str, Any] = Field(default_factory=dict, description="as create()'s policy")


class ScheduleIn(Schema):
    name: str = Field(max_length=100)
    namespace: str = Field(default="default", max_length=256)
    spec: SpecIn
    template: TemplateIn
    overlap: str = Field(default="allow", description="allow | skip | cancel_previous")
    catchup: Any = Field(default=1, description='"skip" or how many missed fires (0..1000) to run after downtime')
    paused: Any = Field(default=False, description="true or false", json_schema_extra={"type": "boolean"})
    reason: str = WHY


class TemplatePatch(Schema):
    kind: str | None = Field(default=None, max_length=256)
    payload: str | None = Field(default=None, max_length=1_000_000)
    priority: Any = Field(default=None, description="an integer", json_schema_extra=_INT)
    tags: dict[str, str] | None = None
    policy: dict[str, Any] | None = None
    lane: str | None = Field(default=None, max_length=256, description="fixed: only the current lane is accepted")


class SchedulePatch(Schema):
    name: str | None = Field(default=None, max_length=100)
    spec: SpecIn | None = None
    template: TemplatePatch | None = None
    overlap: str | None = None
    catchup: Any = Field(default=None, description='"skip" or how many missed fires (0..1000) to run after downtime')
    version: int | None = Field(default=None, description="refuse (409) if the schedule changed since this version")
    reason: str = WHY


class WhyIn(Schema):
    reason: str = WHY


class RunOut(Schema):
    fire_at: int
    outcome: str = Field(description="fired | triggered | skipped (overlap) | missed (count in `missed`)")
    execution_id: str | None
    missed: int
    state: str | None = Field(description="the execution's public state now")


class ScheduleOut(Schema):
    id: str
    namespace: str
    name: str
    spec: dict[str, Any]
    description: str
    template: dict[str, Any]
    overlap: str
    catchup: str
    paused: bool
    next_fire_at: int | None
    version: int
    created_at: int
    created_by: str
    updated_at: int
    updated_by: str
    last_fire_at: int | None
    last_execution_id: str | None
    fires: int
    skipped: int
    missed: int
    upcoming: list[int] = Field(description="the next 5 fire times (ms), none while paused")
    runs: list[RunOut] | None = Field(default=None, description="the latest runs (detail only)")


RESPONSES: dict[int, Any] = {400: ScheduleError, 404: Error, 409: ScheduleError, 422: Error}


def _refused(e: Exception) -> Status:
    if isinstance(e, ScheduleInvalid):
        return Status(400, {"error": "; ".join(f"invalid {f}: {m}" for f, m in e.errors), "kind": "invalid_input",
                            "retryable": False, "fields": [{"field": f, "message": m} for f, m in e.errors]})
    return Status(409, {"error": "the schedule changed meanwhile (version moved); read it again", "kind":
                        "schedule_conflict", "retryable": True})


def _out(client: Client, s: Schedule, *, runs: bool = False) -> dict[str, Any]:
    out = {**s.as_json(), "upcoming": client.schedules.upcoming(s, 5)}
    if runs:
        out["runs"] = [{"fire_at": r.fire_at, "outcome": r.outcome, "execution_id": r.execution_id or None,
                        "missed": r.missed, "state": r.state or None} for r in client.schedules.runs(s.id, 50)]
    return out


def _known(client: Client, schedule_id: str) -> Schedule:
    s = client.schedules.get(schedule_id)  # InvalidId (400) for a malformed id
    if s is None:
        raise NotFound(f"schedule not found: {schedule_id}")
    return s


@router.get("/schedules", response={200: list[ScheduleOut], 400: Error})
def list_schedules(request: HttpRequest, namespace: str | None = None) -> list[dict[str, Any]]:
    client = Client(get_backend())
    return [_out(client, s) for s in client.schedules.list(namespace=namespace)]


@router.post("/schedules", response={201: ScheduleOut, **RESPONSES})
def create_schedule(request: HttpRequest, body: ScheduleIn) -> Status:
    client = Client(get_backend())
    t = body.template
    try:
        with audited(request, "schedule_create", f"schedule:{body.name}", body.reason) as a:
            s = client.schedules.create(
                name=body.name, namespace=body.namespace, cron=body.spec.cron, timezone=body.spec.timezone,
                interval_ms=body.spec.interval_ms, kind=t.kind, lane=t.lane, payload=t.payload, priority=t.priority,
                tags=t.tags, policy=t.policy, overlap=body.overlap, catchup=body.catchup, paused=body.paused,
                by=_by(request))
            a.target, a.detail = f"schedule:{s.id}", f"{s.name}: {s.description}"
    except (ScheduleInvalid, ScheduleConflict) as e:
        return _refused(e)
    return Status(201, _out(client, s))


# The `:verb` routes come before `/schedules/{id}`, whose id would otherwise swallow the suffix.
@router.post("/schedules/{schedule_id}:pause", response={200: ScheduleOut, **RESPONSES})
def pause_schedule(request: HttpRequest, schedule_id: str, body: WhyIn) -> Any:
    return _flip(request, schedule_id, body, "pause")


@router.post("/schedules/{schedule_id}:resume", response={200: ScheduleOut, **RESPONSES})
def resume_schedule(request: HttpRequest, schedule_id: str, body: WhyIn) -> Any:
    return _flip(request, schedule_id, body, "resume")


def _flip(request: HttpRequest, schedule_id: str, body: WhyIn, verb: str) -> Any:
    client = Client(get_backend())
    s = _known(client, schedule_id)
    refused = state_refusal(s, verb)
    if refused:  # a no-op: refused in words, like a form error no audit entry
        return Status(409, {"error": refused, "kind": "not_applicable", "retryable": False})
    try:
        with audited(request, f"schedule_{verb}", f"schedule:{s.id}", body.reason,
                     detail=audit_trail.schedule_detail(s.name)):
            done = getattr(client.schedules, verb)(s.id, by=_by(request))
    except ScheduleNotFound:
        raise NotFound(f"schedule not found: {schedule_id}") from None
    except ScheduleConflict as e:
        return _refused(e)
    return _out(client, done)


@router.post("/schedules/{schedule_id}:trigger", response={200: dict[str, Any], **RESPONSES})
def trigger_schedule(request: HttpRequest, schedule_id: str, body: WhyIn) -> Any:
    """Fire now (the schedule's next fire time stays): `{"execution_id": ...}`."""
    client = Client(get_backend())
    s = _known(client, schedule_id)
    try:
        with audited(request, "schedule_trigger", f"schedule:{s.id}", body.reason) as a:
            eid = client.schedules.trigger(s.id, by=_by(request))
            a.detail = audit_trail.schedule_detail(s.name, eid)
    except ScheduleNotFound:
        raise NotFound(f"schedule not found: {schedule_id}") from None
    except ScheduleConflict as e:
        return _refused(e)
    return {"execution_id": eid}


@router.get("/schedules/{schedule_id}", response={200: ScheduleOut, 400: Error, 404: Error})
def get_schedule(request: HttpRequest, schedule_id: str) -> dict[str, Any]:
    client = Client(get_backend())
    return _out(client, _known(client, schedule_id), runs=True)


@router.patch("/schedules/{schedule_id}", response={200: ScheduleOut, **RESPONSES})
def update_schedule(request: HttpRequest, schedule_id: str, body: SchedulePatch) -> Any:
    client = Client(get_backend())
    s = _known(client, schedule_id)
    changes: dict[str, Any] = {}
    if body.name is not None:
        changes["name"] = body.name
    if body.spec is not None:
        changes.update(cron=body.spec.cron, timezone=body.spec.timezone, interval_ms=body.spec.interval_ms)
    if body.template is not None:
        changes.update({k: v for k, v in body.template.dict().items() if v is not None})
    for name in ("overlap", "catchup"):
        if getattr(body, name) is not None:
            changes[name] = getattr(body, name)
    try:
        with audited(request, "schedule_update", f"schedule:{s.id}", body.reason,
                     detail=", ".join(sorted(changes)) or "nothing"):
            done = client.schedules.update(s.id, by=_by(request), expect_version=None if body.version is None
                                           else str(body.version), **changes)
    except ScheduleNotFound:
        raise NotFound(f"schedule not found: {schedule_id}") from None
    except (ScheduleInvalid, ScheduleConflict) as e:
        return _refused(e)
    return _out(client, done)


@router.delete("/schedules/{schedule_id}", response={204: None, **RESPONSES})
def delete_schedule(request: HttpRequest, schedule_id: str,
                    reason: str = Query(..., min_length=1, max_length=1000, description="Why (required)")) -> Status:
    """Delete the schedule and its run records (the executions it made stay). `reason` is a query parameter."""
    client = Client(get_backend())
    s = _known(client, schedule_id)
    try:
        with audited(request, "schedule_delete", f"schedule:{s.id}", reason,
                     detail=audit_trail.schedule_detail(s.name)):
            client.schedules.delete(s.id, by=_by(request))
    except ScheduleNotFound:
        raise NotFound(f"schedule not found: {schedule_id}") from None
    return Status(204, None)


def _by(request: HttpRequest) -> str:
    from .access import principal

    return principal(request).actor
