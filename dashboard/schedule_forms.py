"""The Schedules page's forms: a schedule (create and edit) and an operator action (pause, resume, trigger,
delete). Both require a reason; every check ffcore makes runs in `clean`, so a refusal is a form error next to its
field and nothing is written (ffcore.schedules.Schedules.check)."""

from __future__ import annotations

import re
from typing import Any

from django import forms

from ffcore.execution.client import Client
from ffcore.schedules import OVERLAPS, Schedule, ScheduleInvalid

from .backend import get_backend
from .forms import ReasonForm

#: "every 10 s" (units ms, s, min, h, d; default s) — anything else is read as a 5-field cron expression.
_EVERY = re.compile(r"^every\s+(\d{1,12})\s*(ms|s|sec|min|m|h|d)?$", re.IGNORECASE)
_UNIT_MS = {"ms": 1, "s": 1000, "sec": 1000, "min": 60_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
#: ffcore's field names -> this form's.
FIELD = {"spec": "when", "spec.cron": "when", "spec.interval_ms": "when", "spec.timezone": "timezone",
         "template.kind": "kind", "template.lane": "lane", "template.priority": "priority",
         "template.payload": "payload", "template.tags": "payload", "template.policy": "payload", "template": "kind",
         "name": "name", "namespace": "name", "overlap": "overlap", "catchup": "catchup"}
#: Form values of the operator actions ("remove" deletes the schedule; shown as "delete").
ACTIONS = ("pause", "resume", "trigger", "remove")


def parse_when(text: str) -> dict[str, Any]:
    m = _EVERY.match(text.strip())
    if m:
        return {"cron": None, "interval_ms": int(m.group(1)) * _UNIT_MS[(m.group(2) or "s").lower()]}
    return {"cron": text.strip(), "interval_ms": None}


def when_of(s: Schedule) -> str:
    if s.spec.interval_ms is not None:
        ms = s.spec.interval_ms
        return f"every {ms // 1000} s" if ms % 1000 == 0 else f"every {ms} ms"
    return s.spec.cron or ""


class ScheduleForm(ReasonForm):
    name = forms.CharField(max_length=100)
    kind = forms.CharField(max_length=256)
    lane = forms.CharField(max_length=256)
    when = forms.CharField(max_length=200, help_text='a cron ("0 9 * * 1") or "every 10 s"')
    timezone = forms.CharField(max_length=64)
    priority = forms.IntegerField(min_value=0, max_value=9000,
                                  error_messages={"invalid": "Priority must be a whole number from 0 to 9000."})
    overlap = forms.ChoiceField(choices=[(o, o) for o in OVERLAPS])
    catchup = forms.CharField(max_length=10, help_text='"skip" or how many missed fires to run after downtime')
    payload = forms.CharField(max_length=100_000, required=False, strip=False)

    #: Set by the view: the schedule being edited (None: a new one).
    editing: Schedule | None = None

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if self.errors:
            return data
        client = Client(get_backend())
        try:
            catchup = "skip" if data["catchup"].strip().lower() == "skip" else data["catchup"].strip()
            kw = {"name": data["name"], "kind": data["kind"], "lane": data["lane"], **parse_when(data["when"]),
                  "timezone": data["timezone"].strip(), "payload": data["payload"], "priority": data["priority"],
                  "overlap": data["overlap"], "catchup": catchup}
            if self.editing is None:
                client.schedules.check(**kw)
            else:
                e = self.editing
                if kw["lane"] != e.template.lane:
                    raise ScheduleInvalid("template.lane", "a schedule's lane cannot change; create a new schedule")
                client.schedules.check(**kw, namespace=e.namespace, tags=e.template.tags, policy=e.template.policy,
                                       schedule_id=e.id)
        except ScheduleInvalid as err:
            self.add_error(FIELD.get(err.field, "name"), err.message)
            return data
        data["schedule"] = kw
        return data


class ScheduleActionForm(ReasonForm):
    action = forms.ChoiceField(choices=[(a, a) for a in ACTIONS])
