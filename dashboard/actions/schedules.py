"""Operator actions on schedules (audited, like dashboard.actions): create, edit, pause, resume, trigger, delete."""

from __future__ import annotations

from typing import Any

from ffcore.backend import Backend
from ffcore.execution.client import Client
from ffcore.schedules import Schedule, state_refusal

from .. import audit_trail
from . import ActionResult, run_action


def create(backend: Backend, actor: str, reason: str, spec: dict[str, Any]) -> tuple[ActionResult, str]:
    """Create the schedule the form checked; returns the result and the new id ("" when refused)."""
    made: list[Schedule] = []

    def run() -> str:
        made.append(Client(backend).schedules.create(**spec, by=actor))
        return f"Schedule {made[0].name} created."

    result = run_action(backend, actor, "schedule_create", f"schedule:{spec['name']}", reason, run,
                        detail=lambda: f"{made[0].id} {made[0].name}: {made[0].description}")
    return result, made[0].id if made else ""


def edit(backend: Backend, actor: str, reason: str, s: Schedule, spec: dict[str, Any]) -> ActionResult:
    changes = {k: v for k, v in spec.items() if k != "lane"}

    def run() -> str:
        Client(backend).schedules.update(s.id, by=actor, expect_version=s.version, **changes)
        return "Schedule saved."

    return run_action(backend, actor, "schedule_update", f"schedule:{s.id}", reason, run,
                      detail=f"{spec['name']}: {spec.get('cron') or spec.get('interval_ms')}")


def act(backend: Backend, actor: str, reason: str, s: Schedule, action: str) -> ActionResult:
    """pause, resume, trigger (fire now) or delete ("remove" is the form's word for it). An action the schedule's
    state does not allow (pause a paused one, resume an active one) is refused in words, changes nothing and
    leaves no audit entry, like a form error."""
    action = "delete" if action == "remove" else action
    refused = state_refusal(s, action)
    if refused:
        return ActionResult(False, refused, "not_applicable")
    schedules = Client(backend).schedules
    made: list[str] = []

    def run() -> str:
        if action == "trigger":
            made.append(schedules.trigger(s.id, by=actor))
            return f"Fired now: execution {made[0]}."
        if action == "delete":
            schedules.delete(s.id, by=actor)
            return f"Schedule {s.name} deleted (the executions it made stay)."
        getattr(schedules, action)(s.id, by=actor)
        return "Paused: nothing fires until it is resumed." if action == "pause" else "Resumed."

    return run_action(backend, actor, f"schedule_{action}", f"schedule:{s.id}", reason, run,
                      detail=lambda: audit_trail.schedule_detail(s.name, made[0] if made else ""))
