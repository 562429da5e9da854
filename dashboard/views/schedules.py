"""Pages: schedules (list with the spec in words, next fire times, latest runs; a new-schedule form) and one
schedule (history chart, runs, and the operator forms: pause/resume/trigger/delete, edit)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path, reverse
from django.views.decorators.http import require_GET, require_POST

from ffcore.schedules import DEFAULT_CATCHUP

from ..access import operator_required
from ..actions import schedules as actions
from ..backend import get_backend
from ..schedule_forms import ScheduleActionForm, ScheduleForm, when_of
from ..selectors import schedules as sel

PAGE, DETAIL = "dashboard/schedules.html", "dashboard/schedule.html"
NEW_DEFAULTS = {"lane": "default", "timezone": "UTC", "priority": 0, "overlap": "allow",
                "catchup": str(DEFAULT_CATCHUP), "when": "every 60 s"}


def _list_ctx(form: ScheduleForm | None = None, result: Any = None) -> dict[str, Any]:
    rows, now = sel.schedules_page(get_backend())
    return {"rows": rows, "now_ms": now, "form": form or ScheduleForm(prefix="new", initial=NEW_DEFAULTS),
            "result": result}


@require_GET
@login_required
def schedules(request: HttpRequest) -> HttpResponse:
    return render(request, f"{PAGE}#list" if request.htmx else PAGE, _list_ctx())


@require_POST
@operator_required
def create(request: HttpRequest) -> HttpResponse:
    form = ScheduleForm.bind(request, prefix="new")
    if form.is_valid():
        result, sid = actions.create(get_backend(), request.user.get_username(), form.cleaned_data["reason"],
                                     form.cleaned_data["schedule"])
        if result.ok:
            url = reverse("schedule", args=[sid])
            if request.htmx:
                resp = render(request, f"{PAGE}#new", {**_list_ctx(result=result), "created": sid})
                resp["HX-Redirect"] = url
                return resp
            return redirect(url)
        return render(request, f"{PAGE}#new" if request.htmx else PAGE, _list_ctx(form, result), status=result.status)
    return render(request, f"{PAGE}#new" if request.htmx else PAGE, _list_ctx(form), status=400)


def _detail_ctx(row: sel.Row, now: int, *, form: ScheduleForm | None = None, action: ScheduleActionForm | None = None,
                result: Any = None, edit_result: Any = None) -> dict[str, Any]:
    s = row.schedule
    initial = {"name": s.name, "kind": s.template.kind, "lane": s.template.lane, "when": when_of(s),
               "timezone": s.spec.timezone, "priority": s.template.priority, "overlap": s.overlap,
               "catchup": s.catchup_text, "payload": s.template.payload}
    return {"row": row, "s": s, "now_ms": now, "form": form or ScheduleForm(prefix="edit", initial=initial),
            "action": action or ScheduleActionForm(prefix="act"), "result": result, "edit_result": edit_result}


def _gone(request: HttpRequest) -> HttpResponse:
    ctx = {**_list_ctx(), "gone": True}
    return render(request, f"{PAGE}#gone" if request.htmx else PAGE, ctx, status=404)


@require_GET
@login_required
def schedule(request: HttpRequest, schedule_id: str) -> HttpResponse:
    row, now = sel.schedule_page(get_backend(), schedule_id)
    if row is None:
        return _gone(request)
    return render(request, f"{DETAIL}#live" if request.htmx else DETAIL, _detail_ctx(row, now))


@require_POST
@operator_required
def act(request: HttpRequest, schedule_id: str) -> HttpResponse:
    row, now = sel.schedule_page(get_backend(), schedule_id)
    if row is None:
        return _gone(request)
    form = ScheduleActionForm.bind(request, prefix="act")
    if not form.is_valid():
        return render(request, f"{DETAIL}#action" if request.htmx else DETAIL, _detail_ctx(row, now, action=form),
                      status=400)
    name = form.cleaned_data["action"]
    result = actions.act(get_backend(), request.user.get_username(), form.cleaned_data["reason"], row.schedule, name)
    if result.ok and name == "remove":
        ctx = {**_list_ctx(), "deleted": result}
        return render(request, f"{PAGE}#deleted" if request.htmx else PAGE, ctx)
    fresh, now = sel.schedule_page(get_backend(), schedule_id)
    ctx = _detail_ctx(fresh or row, now, action=None if result.ok else form, result=result)
    return render(request, f"{DETAIL}#action" if request.htmx else DETAIL, ctx, status=result.status)


@require_POST
@operator_required
def edit(request: HttpRequest, schedule_id: str) -> HttpResponse:
    row, now = sel.schedule_page(get_backend(), schedule_id)
    if row is None:
        return _gone(request)
    form = ScheduleForm.bind(request, prefix="edit")
    form.editing = row.schedule
    if not form.is_valid():
        return render(request, f"{DETAIL}#edit" if request.htmx else DETAIL, _detail_ctx(row, now, form=form),
                      status=400)
    result = actions.edit(get_backend(), request.user.get_username(), form.cleaned_data["reason"], row.schedule,
                          form.cleaned_data["schedule"])
    fresh, now = sel.schedule_page(get_backend(), schedule_id)
    ctx = _detail_ctx(fresh or row, now, form=None if result.ok else form, edit_result=result)
    return render(request, f"{DETAIL}#edit" if request.htmx else DETAIL, ctx, status=result.status)


urlpatterns: list[Any] = [
    path("schedules/", schedules, name="schedules"),
    path("schedules/new", create, name="schedule_create"),
    path("schedules/<str:schedule_id>/", schedule, name="schedule"),
    path("schedules/<str:schedule_id>/act", act, name="schedule_act"),
    path("schedules/<str:schedule_id>/edit", edit, name="schedule_edit"),
]
