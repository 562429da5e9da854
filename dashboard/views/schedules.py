"""Pages: schedules (list with the spec in words, next fire times, latest runs; a new-schedule form) and one
schedule (history chart, runs, and the operator forms: pause/resume/trigger/delete, edit)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path, reverse
from django.views.decorators.http import require_GET, require_POST

from ffcore.schedules import DEFAULT_CATCHUP

from ..access import operator_required
from ..actions import ActionResult
from ..actions import schedules as actions
from ..backend import get_backend
from ..forms import ReasonForm
from ..schedule_forms import ScheduleActionForm, ScheduleForm, offered, when_of
from ..selectors import schedules as sel

PAGE, DETAIL = "dashboard/schedules.html", "dashboard/schedule.html"
NEW_DEFAULTS = {"lane": "default", "timezone": "UTC", "priority": 0, "overlap": "allow",
                "catchup": str(DEFAULT_CATCHUP), "when": "every 60 s"}


def _list_ctx(form: ScheduleForm | None = None, result: Any = None) -> dict[str, Any]:
    rows, now = sel.schedules_page(get_backend())
    return {"rows": rows, "now_ms": now, "form": form or ScheduleForm(prefix="new", initial=NEW_DEFAULTS),
            "result": result}


def _part(request: HttpRequest, page: str, partial: str, ctx: dict[str, Any], status: int = 200) -> HttpResponse:
    """The partial for htmx, the whole page otherwise."""
    return render(request, f"{page}#{partial}" if request.htmx else page, ctx, status=status)


Context = Callable[[ReasonForm | None, ActionResult | None], dict[str, Any]]


def _submit(request: HttpRequest, form: ReasonForm, page: str, partial: str, context: Context,
            run: Callable[[dict[str, Any]], ActionResult | HttpResponse]) -> HttpResponse:
    """The shape of every schedule form: validate the bound form (400 with its errors), run the action, render
    the form's partial with the result. `context(form, result)` builds the page: result None = the form did not
    validate; form None = a success, so a fresh form shows. `run(cleaned_data)` returns the action's result, or
    the whole answer when a success leaves this form (create goes to the new schedule, delete to the list)."""
    if not form.is_valid():
        return _part(request, page, partial, context(form, None), 400)
    outcome = run(form.cleaned_data)
    if isinstance(outcome, HttpResponse):
        return outcome
    return _part(request, page, partial, context(None if outcome.ok else form, outcome), outcome.status)


@require_GET
@login_required
def schedules(request: HttpRequest) -> HttpResponse:
    if request.htmx:
        return _part(request, PAGE, "list", _list_ctx())
    # A delete's message shows once; "?gone=<id>" (a page whose schedule was deleted elsewhere) adds a neutral
    # note only when no message says it already (the deleting tab can get both redirects).
    notes = [(m.level_tag, str(m)) for m in messages.get_messages(request)]
    gone = request.GET.get("gone", "")[:64]
    return render(request, PAGE, {**_list_ctx(), "notes": notes, "gone_id": "" if notes else gone})


@require_POST
@operator_required
def create(request: HttpRequest) -> HttpResponse:
    def run(data: dict[str, Any]) -> ActionResult | HttpResponse:
        result, sid = actions.create(get_backend(), request.user.get_username(), data["reason"], data["schedule"])
        if not result.ok:
            return result
        url = reverse("schedule", args=[sid])
        if not request.htmx:
            return redirect(url)
        resp = _part(request, PAGE, "new", {**_list_ctx(result=result), "created": sid})
        resp["HX-Redirect"] = url
        return resp

    return _submit(request, ScheduleForm.bind(request, prefix="new"), PAGE, "new", _list_ctx, run)


def _detail_ctx(row: sel.Row, now: int, *, form: ScheduleForm | None = None, action: ScheduleActionForm | None = None,
                result: Any = None, edit_result: Any = None, delete: ScheduleActionForm | None = None,
                delete_result: Any = None) -> dict[str, Any]:
    s = row.schedule
    initial = {"name": s.name, "kind": s.template.kind, "lane": s.template.lane, "when": when_of(s),
               "timezone": s.spec.timezone, "priority": s.template.priority, "overlap": s.overlap,
               "catchup": s.catchup_text, "payload": s.template.payload}
    return {"row": row, "s": s, "now_ms": now, "form": form or ScheduleForm(prefix="edit", initial=initial),
            "action": action or ScheduleActionForm(prefix="act"), "offered": offered(s), "result": result,
            "edit_result": edit_result, "delete": delete or ScheduleActionForm(prefix="del"),
            "delete_result": delete_result}


def _detail_context(schedule_id: str, row: sel.Row, now: int, form_as: str, result_as: str) -> Context:
    """A detail form's page: as read before the form (it did not validate), or read again after the action."""
    def context(form: ReasonForm | None, result: ActionResult | None) -> dict[str, Any]:
        if result is None:
            return _detail_ctx(row, now, **{form_as: form})
        fresh, at = sel.schedule_page(get_backend(), schedule_id)
        named: dict[str, Any] = {form_as: form, result_as: result}
        return _detail_ctx(fresh or row, at, **named)
    return context


def _to_list(request: HttpRequest, status: int = 200, query: str = "") -> HttpResponse:
    """Leave a schedule's page for the list (its message shows there): an htmx request is told to navigate,
    so the old page's live refresh of the schedule stops with it."""
    url = reverse("schedules") + query
    if not request.htmx:
        return redirect(url)
    resp = HttpResponse(status=status)
    resp["HX-Redirect"] = url
    return resp


def _gone(request: HttpRequest, schedule_id: str) -> HttpResponse:
    """A schedule that is not (or no longer) there: a page load or a form shows the 404 note; a live refresh (an
    htmx GET) navigates to the list instead of swapping a red 404 into a page whose schedule was deleted."""
    if request.htmx and request.method == "GET":
        return _to_list(request, 404, "?" + urlencode({"gone": schedule_id}))
    return _part(request, PAGE, "gone", {**_list_ctx(), "gone": True}, 404)


@require_GET
@login_required
def schedule(request: HttpRequest, schedule_id: str) -> HttpResponse:
    row, now = sel.schedule_page(get_backend(), schedule_id)
    if row is None:
        return _gone(request, schedule_id)
    return _part(request, DETAIL, "live", _detail_ctx(row, now))


@require_POST
@operator_required
def act(request: HttpRequest, schedule_id: str) -> HttpResponse:
    row, now = sel.schedule_page(get_backend(), schedule_id)
    if row is None:
        return _gone(request, schedule_id)
    current = row.schedule

    def run(data: dict[str, Any]) -> ActionResult | HttpResponse:
        name = data["action"]
        result = actions.act(get_backend(), request.user.get_username(), data["reason"], current, name)
        if result.ok and name == "remove":
            messages.success(request, result.message)
            return _to_list(request)
        return result

    if "del-action" in request.POST:  # the delete form (destructive, apart from the others)
        return _submit(request, ScheduleActionForm.bind(request, prefix="del"), DETAIL, "delete",
                       _detail_context(schedule_id, row, now, "delete", "delete_result"), run)
    return _submit(request, ScheduleActionForm.bind(request, prefix="act"), DETAIL, "action",
                   _detail_context(schedule_id, row, now, "action", "result"), run)


@require_POST
@operator_required
def edit(request: HttpRequest, schedule_id: str) -> HttpResponse:
    row, now = sel.schedule_page(get_backend(), schedule_id)
    if row is None:
        return _gone(request, schedule_id)
    current = row.schedule
    form = ScheduleForm.bind(request, prefix="edit")
    form.editing = current

    def run(data: dict[str, Any]) -> ActionResult:
        return actions.edit(get_backend(), request.user.get_username(), data["reason"], current, data["schedule"])

    return _submit(request, form, DETAIL, "edit", _detail_context(schedule_id, row, now, "form", "edit_result"), run)


urlpatterns: list[Any] = [
    path("schedules/", schedules, name="schedules"),
    path("schedules/new", create, name="schedule_create"),
    path("schedules/<str:schedule_id>/", schedule, name="schedule"),
    path("schedules/<str:schedule_id>/act", act, name="schedule_act"),
    path("schedules/<str:schedule_id>/edit", edit, name="schedule_edit"),
]
