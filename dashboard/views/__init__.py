"""Thin page views: parse input, read through selectors, act through actions, render templates."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlencode
from uuid import UUID

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from ffcore.errors import InvalidInput
from ffcore.execution import bulk, listing, rules
from ffcore.execution.client import Client

from .. import actions, selectors
from ..access import operator_required
from ..backend import get_backend
from ..forms import BulkConfirmForm, BulkForm, PriorityForm, ReasonForm, TakeForm
from ..models import SavedView
from ..templatetags.ff import human_ms
from . import lookup, search


@require_GET
@login_required
def overview(request: HttpRequest) -> HttpResponse:
    ov = selectors.overview(get_backend())
    template = "dashboard/overview.html#live" if request.htmx else "dashboard/overview.html"
    return render(request, template, {"ov": ov})


@require_GET
@login_required
def system(request: HttpRequest) -> HttpResponse:
    return render(request, "dashboard/system.html", {"info": selectors.system_info(get_backend())})


def page_params(request: HttpRequest, errors: dict[str, str]) -> tuple[int, str | None]:
    """`limit` (1..500, default 50) and `cursor` of a cursor-paged list; bad values become field errors."""
    g = request.GET
    limit = 50
    if g.get("limit"):
        try:
            limit = int(g["limit"])
            if not 1 <= limit <= 500:
                raise ValueError
        except ValueError:
            errors["limit"] = "Limit must be a whole number from 1 to 500."
            limit = 50
    cursor = g.get("cursor") or None
    if cursor:
        try:
            listing.parse_cursor(cursor)
        except InvalidInput:
            errors["cursor"] = "That page link is malformed; showing the first page."
            cursor = None
    return limit, cursor


def _query(request: HttpRequest) -> tuple[listing.Query, dict[str, str]]:
    """Validated list filters; bad values become per-field errors instead of exceptions."""
    g = request.GET
    errors: dict[str, str] = {}
    state = g.get("state", "").strip() or None
    if state and state not in listing.STATE_INDEXES:
        errors["state"] = f"Unknown state {state!r}."
        state = None
    tag = None
    raw_tag = g.get("tag", "").strip()
    if raw_tag:
        if "=" not in raw_tag:
            errors["tag"] = "Write a tag filter as key=value."
        else:
            k, v = raw_tag.split("=", 1)
            tag = (k.strip(), v.strip())
    limit, cursor = page_params(request, errors)
    order = g.get("order", "").strip() or "newest"
    if order not in listing.ORDERS:
        errors["order"] = "Sort by newest or oldest first."
        order = "newest"
    direction = "prev" if g.get("direction") == "prev" and cursor else "next"
    created = {name: created_bound(g.get(name, ""), name, errors) for name in ("created_from", "created_to")}
    lo, hi = created["created_from"], created["created_to"]
    if lo is not None and hi is not None and lo > hi:
        errors["created_to"] = "The end of the range is before its start."
        lo = hi = None
    return listing.Query(lane=g.get("lane", "").strip() or None, state=state, kind=g.get("kind", "").strip() or None,
                         tag=tag, cursor=cursor, limit=limit, order=order, created_from=lo, created_to=hi,
                         direction=direction), errors


#: The list's filter parameters (kept across pages, in saved views and the bulk action's filter).
LIST_FILTERS = ("lane", "state", "kind", "tag", "limit", "order", "created_from", "created_to")


def created_bound(raw: str, name: str, errors: dict[str, str]) -> int | None:
    """A created-between bound: a date and time in UTC (the form's datetime-local input) or epoch ms; the end
    of the range takes the whole minute (or day) it names."""
    raw = raw.strip()
    if not raw:
        return None
    if raw.isdigit():
        return int(raw)
    for fmt, span in (("%Y-%m-%dT%H:%M", 60_000), ("%Y-%m-%dT%H:%M:%S", 1000), ("%Y-%m-%d", 86_400_000)):
        try:
            at = datetime.strptime(raw, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
        ms = int(at.timestamp() * 1000)
        return ms + span - 1 if name == "created_to" else ms
    errors[name] = "Give a date and time (UTC) as YYYY-MM-DDTHH:MM, or epoch milliseconds."
    return None


@require_GET
@login_required
def executions(request: HttpRequest) -> HttpResponse:
    jump = request.GET.get("id", "").strip()
    q, errors = _query(request)
    if jump:  # an id, a bare UUID or an id prefix (dashboard/views/search.py)
        found, error = search.jump(jump)
        if found is not None:
            return found
        errors["id"] = error
    backend = get_backend()
    page = selectors.executions(backend, q)
    link_rows(page.page.rows)
    decorate_rows(page.page.rows, backend.now_ms(), page.page.tags)
    filters = {k: v for k, v in request.GET.items() if k in LIST_FILTERS and v and k not in errors}
    pg = page.page
    ctx = {"p": page, "errors": errors, "filters": filters, "filter_qs": urlencode(filters),
           "next_qs": urlencode({**filters, "cursor": pg.next_cursor}) if pg.next_cursor else "",
           "prev_qs": urlencode({**filters, "cursor": pg.prev_cursor, "direction": "prev"}) if pg.prev_cursor else "",
           "saved_views": list(SavedView.objects.filter(user=request.user)), "view_form": search.SavedViewForm()}
    template = "dashboard/executions.html#rows" if request.htmx and request.GET.get("cursor") and \
        q.direction == "next" else "dashboard/executions.html"
    return render(request, template, ctx, status=400 if errors else 200)


#: What `reverse` leaves unquoted in a path argument (Django's RFC 3986 sub-delimiters plus "/~:@").
_PATH_SAFE = "!$&'()*+,;=/~:@"


def link_rows(rows: list[dict[str, str]]) -> None:
    """Give each execution row its `href`: one `reverse` per page instead of two per row."""
    pattern = reverse("execution", args=["EID"])
    for r in rows:
        r["href"] = pattern.replace("EID", quote(r["execution_id"], safe=_PATH_SAFE))


def decorate_rows(rows: list[dict[str, Any]], now_ms: int, tags: dict[str, dict[str, str]]) -> None:
    """Each row's run time (started to completed, or to now while it runs) and its tags, for the list's columns."""
    for r in rows:
        start, end = r.get("started_at") or "", r.get("completed_at") or ""
        if start.isdigit():
            stop = int(end) if end.isdigit() else now_ms if r.get("public_state") == "active" else None
            r["duration"] = human_ms(max(stop - int(start), 0)) if stop is not None else ""
        r["tags"] = sorted(tags.get(r["execution_id"], {}).items())


@require_GET
@login_required
def execution(request: HttpRequest, eid: str) -> HttpResponse:
    detail = selectors.execution_detail(get_backend(), lookup.execution_id(eid))
    if detail is None:
        raise Http404("No execution has this id.")
    template = "dashboard/execution.html#live" if request.htmx else "dashboard/execution.html"
    return render(request, template, {"d": detail, "ex": detail.execution, "forms": _forms(_offered(detail))})


def _offered(detail: selectors.Detail) -> tuple[str, ...]:
    """The actions the engine would take in this state (ffcore.execution.rules: the same table refuses)."""
    ex = detail.execution
    return rules.allowed(ex.core, max_replays=rules.max_replays_of(ex.policy))


def _forms(offered: tuple[str, ...] = rules.EXECUTION_ACTIONS) -> dict[str, ReasonForm]:
    every = {"cancel": ReasonForm(prefix="cancel"), "replay": ReasonForm(prefix="replay"),
             "revoke": ReasonForm(prefix="revoke"), "priority": PriorityForm(prefix="priority"),
             "take": TakeForm(prefix="take")}
    return {name: form for name, form in every.items() if name in offered}


#: The execution page's action forms: name -> (form class, the action it runs with the cleaned form).
_ACTIONS: dict[str, tuple[type[ReasonForm], Callable[..., actions.ActionResult]]] = {
    "cancel": (ReasonForm, lambda b, actor, eid, reason, data: actions.cancel(b, actor, eid, reason)),
    "replay": (ReasonForm, lambda b, actor, eid, reason, data: actions.replay(b, actor, eid, reason)),
    "revoke": (ReasonForm, lambda b, actor, eid, reason, data: actions.revoke_lease(b, actor, eid, reason)),
    "priority": (PriorityForm, lambda b, actor, eid, reason, data: actions.change_priority(
        b, actor, eid, reason, data["priority"])),
    "take": (TakeForm, lambda b, actor, eid, reason, data: actions.take_now(
        b, actor, eid, reason, data["lease_seconds"] * 1000)),
}


@require_POST
@operator_required
def act(request: HttpRequest, eid: str, name: str) -> HttpResponse:
    """One view for the execution page's actions (the URL conf passes `name`)."""
    eid = lookup.execution_id(eid)
    form_class, run = _ACTIONS[name]
    form = form_class.bind(request, prefix=name)
    result = None
    status = 400
    if form.is_valid():
        result = run(get_backend(), request.user.get_username(), eid, form.cleaned_data["reason"], form.cleaned_data)
        status = result.status
    forms = _forms()
    forms[name] = form if result is None or not result.ok else forms[name]
    ctx = {"target": eid, "name": name, "form": forms[name], "result": result}
    if request.htmx:
        return render(request, "dashboard/execution.html#action", ctx, status=status)
    detail = selectors.execution_detail(get_backend(), eid)
    if detail is None:
        raise Http404("No execution has this id.")
    # The form that was submitted stays (with its outcome); the others follow the new state.
    forms = {n: f for n, f in forms.items() if n == name or n in _offered(detail)}
    return render(request, "dashboard/execution.html",
                  {"d": detail, "ex": detail.execution, "forms": forms, "results": {name: result}}, status=status)


# The Workers and Audit pages live in views/workers.py and views/audit.py.


# ------------------------------------------------------------------ bulk actions
BULK_SAMPLE = 10


def _bulk_query(request: HttpRequest) -> tuple[listing.Query, dict[str, str]]:
    q, errors = _query(request)  # filters arrive in the query string, like the list itself
    return listing.Query(q.lane, q.state, q.kind, q.tag, None, 500), errors


@require_POST
@operator_required
def bulk_preview(request: HttpRequest) -> HttpResponse:
    """Exact count and a sample of what a bulk action would touch, and a confirm form."""
    q, errors = _bulk_query(request)
    form = BulkForm.bind(request)
    backend = get_backend()
    ctx: dict[str, object] = {"form": form, "filter_qs": request.GET.urlencode(), "errors": errors}
    if form.is_valid() and not errors:
        got = bulk.collect(backend, q, Client(backend).lanes())
        ctx.update({"count": len(got.eids), "capped": got.capped, "sample": got.eids[:BULK_SAMPLE],
                    "action": form.cleaned_data["action"], "reason": form.cleaned_data["reason"]})
        return render(request, "dashboard/executions.html#bulk", ctx)
    return render(request, "dashboard/executions.html#bulk", ctx, status=400)


@require_POST
@operator_required
def bulk_run(request: HttpRequest) -> HttpResponse:
    q, errors = _bulk_query(request)
    form = BulkConfirmForm.bind(request)
    backend = get_backend()
    ctx: dict[str, object] = {"form": form, "filter_qs": request.GET.urlencode(), "errors": errors}
    if not form.is_valid() or errors:
        return render(request, "dashboard/executions.html#bulk", ctx, status=400)
    got = bulk.collect(backend, q, Client(backend).lanes())
    action, reason = form.cleaned_data["action"], form.cleaned_data["reason"]
    if got.capped or len(got.eids) != form.cleaned_data["confirm_count"]:
        # The set changed since the preview: show the new count and ask again.
        ctx.update({"count": len(got.eids), "capped": got.capped, "sample": got.eids[:BULK_SAMPLE], "action": action,
                    "reason": reason, "changed": True})
        return render(request, "dashboard/executions.html#bulk", ctx, status=409)
    job = actions.bulk_start(backend, request.user.get_username(), action, reason, got.eids)
    return render(request, "dashboard/executions.html#progress", {"job": bulk.status(backend, job)})


@require_GET
@login_required
def bulk_status(request: HttpRequest, job: UUID) -> HttpResponse:
    # The URL only matches a UUID: a crafted id can never name another `ff:bulk:*` key.
    st = bulk.status(get_backend(), str(job))
    if st is None:
        raise Http404("No such bulk job (jobs are kept for a day).")
    if request.htmx:
        return render(request, "dashboard/executions.html#progress", {"job": st})
    return render(request, "dashboard/bulk.html", {"job": st})
