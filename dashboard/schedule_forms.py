"""The Schedules page's forms: a schedule (create and edit) and an operator action (pause, resume, trigger,
delete). Both require a reason; every check ffcore makes runs in `clean`, so a refusal is a form error next to its
field and nothing is written (ffcore.schedules.Schedules.check). All bad fields are reported at once."""

from __future__ import annotations

from typing import Any

from django import forms

from ffcore.execution.client import Client
from ffcore.schedules import OVERLAPS, Schedule, ScheduleInvalid, parse_interval
from ffcore.schedules.spec import duration_words

from .backend import get_backend
from .forms import ReasonForm

#: ffcore's field names -> this form's.
FIELD = {"spec": "when", "spec.cron": "when", "spec.interval_ms": "when", "spec.timezone": "timezone",
         "template.kind": "kind", "template.lane": "lane", "template.priority": "priority",
         "template.payload": "payload", "template.tags": "payload", "template.policy": "payload", "template": "kind",
         "name": "name", "namespace": "name", "overlap": "overlap", "catchup": "catchup"}
#: Form values of the operator actions ("remove" deletes the schedule; shown as "delete").
ACTIONS = ("pause", "resume", "trigger", "remove")


def parse_when(text: str) -> dict[str, Any]:
    """"every ..." is an interval (ffcore.schedules.parse_interval: "every 5 minutes", "every 2 h", "every 30s");
    anything else is a 5-field cron expression. Raises ScheduleInvalid naming spec.interval_ms."""
    text = text.strip()
    if text.lower().startswith("every"):
        return {"cron": None, "interval_ms": parse_interval(text)}
    return {"cron": text, "interval_ms": None}


def when_of(s: Schedule) -> str:
    if s.spec.interval_ms is not None:
        return "every " + duration_words(s.spec.interval_ms)
    return s.spec.cron or ""


class ScheduleForm(ReasonForm):
    name = forms.CharField(max_length=100)
    kind = forms.CharField(max_length=256)
    lane = forms.CharField(max_length=256)
    when = forms.CharField(max_length=200, help_text='a cron ("0 9 * * 1") or an interval ("every 5 minutes", '
                                                  '"every 2 h", "every 30s")')
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
        # ffcore checks what Django's own field checks let through, so one answer shows every bad field; a field
        # that already has an error gets a harmless stand-in here and keeps its own message only.
        stand_in = {"name": "x", "kind": "x", "lane": "default", "when": "every 60 s", "timezone": "UTC",
                    "priority": 0, "overlap": "allow", "catchup": "1", "payload": ""}
        v = {k: data[k] if k in data else stand_in[k] for k in stand_in}
        own = set(self.errors)
        found: list[tuple[str, str]] = []
        try:
            when = parse_when(v["when"])
        except ScheduleInvalid as err:
            found.extend(err.errors)
            when = parse_when(stand_in["when"])
        catchup = "skip" if v["catchup"].strip().lower() == "skip" else v["catchup"].strip()
        kw = {"name": v["name"], "kind": v["kind"], "lane": v["lane"], **when, "timezone": v["timezone"].strip(),
              "payload": v["payload"], "priority": v["priority"], "overlap": v["overlap"], "catchup": catchup}
        try:
            e = self.editing
            if e is None:
                Client(get_backend()).schedules.check(**kw)
            else:
                if kw["lane"] != e.template.lane:
                    found.append(("template.lane", "a schedule's lane cannot change; create a new schedule"))
                    kw["lane"] = e.template.lane
                Client(get_backend()).schedules.check(**kw, namespace=e.namespace, tags=e.template.tags,
                                                      policy=e.template.policy, schedule_id=e.id)
        except ScheduleInvalid as err:
            found.extend(err.errors)
        for field, message in found:
            name = FIELD.get(field, "name")
            if name not in own:
                self.add_error(name, message)
        if not self.errors:
            data["schedule"] = kw
        return data


class ScheduleActionForm(ReasonForm):
    """Every action is a valid choice (a page left open may post one its schedule's state no longer allows: the
    action refuses it in words); the page offers only `offered(s)`."""

    action = forms.ChoiceField(choices=[(a, a) for a in ACTIONS])


def offered(s: Schedule) -> tuple[str, ...]:
    """The form values of the actions `s`'s state allows (delete is offered separately, as a destructive form)."""
    return ("resume", "trigger") if s.paused else ("pause", "trigger")
