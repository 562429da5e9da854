"""Pages: waitpoints inbox and signals.

The inbox lists every open waitpoint across the fleet (filterable, cursor-paged); operators signal,
resume and close from a row or from the execution page. The forms are one shared fragment
(`dashboard/_waitpoint_forms.html`), swapped in place by htmx with the outcome.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import path
from django.views.decorators.http import require_GET, require_POST

from ffcore.errors import InvalidId
from ffcore.execution import bulk
from ffcore.execution.client import Client
from ffcore.ids import ExecutionId, parse_waitpoint_id
from ffcore.suspension.inbox import STATES, InboxQuery

from ..access import operator_required
from ..actions import ActionResult
from ..actions import waitpoints as actions
from ..backend import get_backend
from ..forms import ReasonForm
from ..selectors import waitpoints as selectors
from ..waitpoint_forms import BulkSignalForm, SignalForm
from . import page_params

FILTERS = ("lane", "kind", "state", "signal", "execution", "limit")


def _query(request: HttpRequest) -> tuple[InboxQuery, dict[str, str]]:
    """Validated inbox filters; bad values become per-field errors (and are ignored)."""
    g = request.GET
    errors: dict[str, str] = {}
    state = g.get("state", "").strip() or None
    if state and state not in STATES:
        errors["state"] = f"Unknown waitpoint state {state!r}; use pending or active."
        state = None
    execution = g.get("execution", "").strip() or None
    if execution:
        try:
            execution = ExecutionId(execution)
        except InvalidId as e:
            errors["execution"] = str(e)
            execution = None
    limit, cursor = page_params(request, errors)
    return InboxQuery(lane=g.get("lane", "").strip() or None, kind=g.get("kind", "").strip() or None, state=state,
                      signal=g.get("signal", "").strip() or None, execution=execution, cursor=cursor,
                      limit=limit), errors


def signal_form() -> SignalForm:
    return SignalForm(initial={"idempotency_key": uuid.uuid4().hex})


@require_GET
@login_required
def inbox(request: HttpRequest) -> HttpResponse:
    q, errors = _query(request)
    view = selectors.inbox(get_backend(), q)
    filters = {k: v for k, v in request.GET.items() if k in FILTERS and v and k not in errors}
    ctx = {"v": view, "errors": errors, "filters": filters, "new_signal_form": signal_form(),
           "filter_qs": urlencode({k: v for k, v in filters.items() if k != "limit"}),
           "live_qs": urlencode({**filters, "live": "1"}),
           "next_qs": urlencode({**filters, "cursor": view.page.next_cursor}) if view.page.next_cursor else ""}
    # Rows only for "load more" (cursor) and for live refreshes of the first page (live=1).
    partial = request.htmx and (request.GET.get("cursor") or request.GET.get("live"))
    template = "dashboard/waitpoints.html#rows" if partial else "dashboard/waitpoints.html"
    return render(request, template, ctx, status=400 if errors else 200)


def _ids(eid: str, wid: str | None) -> tuple[str, str] | None:
    try:
        return ExecutionId(eid), parse_waitpoint_id(wid) if wid is not None else ""
    except InvalidId:
        return None


def _respond(request: HttpRequest, name: str, ctx: dict[str, Any], result: ActionResult | None) -> HttpResponse:
    status = 400 if result is None else result.status
    ctx.update({"result": result, "is_operator": True})
    if request.htmx:
        return render(request, f"dashboard/_waitpoint_forms.html#{name}", ctx, status=status)
    return render(request, "dashboard/waitpoint_action.html", {**ctx, "name": name}, status=status)


def _bad_ids(request: HttpRequest, name: str, eid: str, wid: str) -> HttpResponse:
    ctx: dict[str, Any] = {"eid": eid, "wid": wid, "form": ReasonForm() if name != "signal" else signal_form()}
    result = ActionResult(False, "That execution or waitpoint id is malformed.", "invalid_id")
    if request.htmx:
        return render(request, f"dashboard/_waitpoint_forms.html#{name}", {**ctx, "result": result}, status=404)
    return render(request, "dashboard/waitpoint_action.html", {**ctx, "name": name, "result": result}, status=404)


@require_POST
@operator_required
def act_signal(request: HttpRequest, eid: str, wid: str) -> HttpResponse:
    ids = _ids(eid, wid)
    if ids is None:
        return _bad_ids(request, "signal", eid, wid)
    form = SignalForm.bind(request)
    result = None
    if form.is_valid():
        d = form.cleaned_data
        result = actions.signal(get_backend(), request.user.get_username(), ids[0], ids[1], d["reason"],
                                name=d["name"], payload=d["payload"], idempotency_key=d["idempotency_key"])
    # Keep what the operator typed after a refusal; a fresh form (new idempotency key) after success.
    shown = signal_form() if result is not None and result.ok else form
    return _respond(request, "signal", {"eid": ids[0], "wid": ids[1], "form": shown}, result)


@require_POST
@operator_required
def act_resume(request: HttpRequest, eid: str) -> HttpResponse:
    ids = _ids(eid, None)
    if ids is None:
        return _bad_ids(request, "resume", eid, "")
    form = ReasonForm.bind(request)
    result = actions.resume(get_backend(), request.user.get_username(), ids[0],
                            form.cleaned_data["reason"]) if form.is_valid() else None
    return _respond(request, "resume", {"eid": ids[0], "form": ReasonForm() if result and result.ok else form},
                    result)


@require_POST
@operator_required
def act_close(request: HttpRequest, eid: str, wid: str) -> HttpResponse:
    ids = _ids(eid, wid)
    if ids is None:
        return _bad_ids(request, "close", eid, wid)
    form = ReasonForm.bind(request)
    result = actions.close_waitpoint(get_backend(), request.user.get_username(), ids[0], ids[1],
                                     form.cleaned_data["reason"]) if form.is_valid() else None
    return _respond(request, "close", {"eid": ids[0], "wid": ids[1],
                                       "form": ReasonForm() if result and result.ok else form}, result)


# ------------------------------------------------------------------ bulk signal
#: Targets listed in a preview.
BULK_SAMPLE = 10


def _selected(request: HttpRequest, errors: dict[str, str]) -> list[tuple[str, str]]:
    """The ticked rows ("<execution id> <waitpoint id>"), validated, in order, without repeats."""
    out: list[tuple[str, str]] = []
    for raw in request.POST.getlist("sel"):
        eid, _, wid = raw.strip().partition(" ")
        ids = _ids(eid, wid.strip())
        if ids is None:
            errors["sel"] = "A selected row is malformed; reload the page."
            return []
        if ids not in out:
            out.append(ids)
    if not out:
        errors["sel"] = "Tick at least one row, or choose every row of the filter."
    if len(out) > bulk.BULK_CAP:
        errors["sel"] = f"At most {bulk.BULK_CAP} rows at once."
    return out


def _bulk_targets(request: HttpRequest, form: BulkSignalForm, q: InboxQuery,
                  errors: dict[str, str]) -> tuple[list[tuple[str, str]], bool, int | None]:
    """(targets, capped, how many expect the signal name or None when unknown) for a valid form."""
    if form.cleaned_data["mode"] == "selected":
        return _selected(request, errors), False, None
    backend = get_backend()
    got = bulk.collect_waitpoints(backend, replace(q, cursor=None), Client(backend).lanes())
    return got.targets, got.capped, got.expecting(form.cleaned_data["name"])


def _bulk_render(request: HttpRequest, ctx: dict[str, Any], status: int = 200) -> HttpResponse:
    template = "dashboard/waitpoints.html#bulk" if request.htmx else "dashboard/waitpoint_bulk.html"
    return render(request, template, ctx, status=status)


@require_POST
@operator_required
def bulk_signal_preview(request: HttpRequest) -> HttpResponse:
    """How many waitpoints one signal would go to, a sample, and the confirm form; nothing is delivered."""
    q, errors = _query(request)
    form = BulkSignalForm.bind(request)
    ctx: dict[str, Any] = {"bulk_form": form, "filter_qs": _filter_qs(request), "errors": errors}
    if not form.is_valid() or errors:
        return _bulk_render(request, ctx, 400)
    targets, capped, expecting = _bulk_targets(request, form, q, errors)
    if errors:
        return _bulk_render(request, ctx, 400)
    ctx.update(_preview_ctx(form, targets, capped, expecting))
    return _bulk_render(request, ctx)


def _preview_ctx(form: BulkSignalForm, targets: list[tuple[str, str]], capped: bool,
                 expecting: int | None) -> dict[str, Any]:
    d = form.cleaned_data
    return {"count": len(targets), "capped": capped, "sample": targets[:BULK_SAMPLE], "expecting": expecting,
            "targets": targets if d["mode"] == "selected" else [], "mode": d["mode"], "signal_name": d["name"],
            "payload_text": form.data.get("payload", ""), "reason": d["reason"]}


@require_POST
@operator_required
def bulk_signal_run(request: HttpRequest) -> HttpResponse:
    q, errors = _query(request)
    form = BulkSignalForm.bind(request)
    ctx: dict[str, Any] = {"bulk_form": form, "filter_qs": _filter_qs(request), "errors": errors}
    if form.is_valid() and form.cleaned_data["confirm_count"] is None:
        form.add_error("confirm_count", "The count to confirm is missing; preview again.")
    if not form.is_valid() or errors:
        return _bulk_render(request, ctx, 400)
    targets, capped, expecting = _bulk_targets(request, form, q, errors)
    if errors:
        return _bulk_render(request, ctx, 400)
    if capped or len(targets) != form.cleaned_data["confirm_count"]:
        # The set changed since the preview: show the new count and ask again.
        ctx.update({**_preview_ctx(form, targets, capped, expecting), "changed": True})
        return _bulk_render(request, ctx, 409)
    d = form.cleaned_data
    backend = get_backend()
    job = actions.bulk_signal_start(backend, request.user.get_username(), d["reason"], targets, name=d["name"],
                                    payload=d["payload"])
    return render(request, "dashboard/executions.html#progress", {"job": bulk.status(backend, job)})


def _filter_qs(request: HttpRequest) -> str:
    return urlencode({k: v for k, v in request.GET.items() if k in FILTERS and k != "limit" and v})


urlpatterns: list[Any] = [
    path("waitpoints/", inbox, name="waitpoints"),
    path("waitpoints/bulk/preview", bulk_signal_preview, name="wp_bulk_preview"),
    path("waitpoints/bulk/run", bulk_signal_run, name="wp_bulk_run"),
    path("waitpoints/<str:eid>/resume", act_resume, name="wp_resume"),
    path("waitpoints/<str:eid>/<str:wid>/signal", act_signal, name="wp_signal"),
    path("waitpoints/<str:eid>/<str:wid>/close", act_close, name="wp_close"),
]
