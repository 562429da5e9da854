"""Pages: flows list, the DAG view (graph JSON + live states), cancel flow."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import path, reverse
from django.views.decorators.http import require_GET, require_POST

from ffcore.errors import InvalidInput
from ffcore.execution.listing import parse_cursor
from ffcore.execution.rules import TERMINAL_FLOW_STATES
from ffcore.flows import history as fhistory
from ffcore.flows.reads import STATE_ORDER
from ffcore.flows.tags import read_flow_tags

from ..access import operator_required
from ..actions import flows as flow_actions
from ..backend import get_backend
from ..forms import ReasonForm
from ..selectors import flows as sel
from . import lookup


@require_GET
@login_required
def flows(request: HttpRequest) -> HttpResponse:
    cursor = request.GET.get("cursor") or None
    errors: dict[str, str] = {}
    if cursor:
        try:
            parse_cursor(cursor)
        except InvalidInput:
            errors["cursor"] = "That page link is malformed; showing the first page."
            cursor = None
    page = sel.flows_page(get_backend(), cursor)
    ctx = {"page": page, "errors": errors,
           "next_qs": urlencode({"cursor": page.next_cursor}) if page.next_cursor else ""}
    template = "dashboard/flows.html#rows" if request.htmx and cursor else "dashboard/flows.html"
    return render(request, template, ctx, status=400 if errors else 200)


def _hops(request: HttpRequest) -> tuple[int, str]:
    raw = request.GET.get("hops", "").strip()
    if not raw:
        return sel.DEFAULT_HOPS, ""
    if not raw.isdigit() or not 1 <= int(raw) <= sel.MAX_HOPS:
        return sel.DEFAULT_HOPS, f"Hops must be a whole number from 1 to {sel.MAX_HOPS}."
    return int(raw), ""


def _members_params(request: HttpRequest, errors: dict[str, str]) -> tuple[str, int]:
    """The member list's state filter (`mstate`) and page (`mpage`, from 1); bad values become field errors."""
    state = request.GET.get("mstate", "").strip()
    if state and state not in STATE_ORDER:
        errors["mstate"] = f"Unknown state {state!r}."
        state = ""
    raw = request.GET.get("mpage", "").strip()
    if raw and not (raw.isdigit() and int(raw) >= 1):
        errors["mpage"] = "Page must be a whole number from 1."
        raw = ""
    return state, int(raw or 1)


def _view(request: HttpRequest, flow_id: str) -> tuple[sel.FlowView, dict[str, str]]:
    hops, err = _hops(request)
    errors = {"hops": err} if err else {}
    state, page = _members_params(request, errors)
    view = sel.flow_view(get_backend(), lookup.flow_id(flow_id), focus=request.GET.get("focus") or None, hops=hops,
                         href=reverse("execution", args=["EID"]).replace("EID", "{}"), member_state=state,
                         member_page=page)
    if view is None:
        raise Http404("No flow has this id.")
    return view, errors


def _members_qs(request: HttpRequest, view: sel.FlowView) -> dict[str, str]:
    """Query strings of the member list's previous / next page links (keeping focus, hops and the filter)."""
    keep = {k: v for k, v in request.GET.items() if k in {"focus", "hops", "mstate"} and v}
    out = {}
    if view.member_page > 1:
        out["prev"] = urlencode({**keep, "mpage": view.member_page - 1})
    if view.member_page < view.member_pages:
        out["next"] = urlencode({**keep, "mpage": view.member_page + 1})
    return out


@require_GET
@login_required
def flow(request: HttpRequest, flow_id: str) -> HttpResponse:
    view, errors = _view(request, flow_id)
    return render(request, "dashboard/flow.html", {"v": view, "g": view.graph, "errors": errors,
                                                   "tags": read_flow_tags(get_backend(), view.graph.flow_id),
                                                   "flow_id": view.graph.flow_id, "form": ReasonForm(prefix="cancel"),
                                                   "members_qs": _members_qs(request, view),
                                                   "states": STATE_ORDER, "terminal_flow_states": TERMINAL_FLOW_STATES,
                                                   "history": fhistory.page(get_backend(), view.graph.flow_id)},
                  status=400 if errors else 200)


@require_GET
@login_required
def flow_counts(request: HttpRequest, flow_id: str) -> HttpResponse:
    """The count chips of a flow page, re-rendered when a push names the flow (issue #25)."""
    counts = sel.flow_counts(get_backend(), lookup.flow_id(flow_id))
    if counts is None:
        raise Http404("No flow has this id.")
    return render(request, "dashboard/flow.html#counts", {"v": counts, "g": counts})


@require_GET
@login_required
def flow_groups(request: HttpRequest, flow_id: str) -> HttpResponse:
    """The edge-group table of a flow page, re-rendered when a push names the flow."""
    groups = sel.flow_groups(get_backend(), lookup.flow_id(flow_id))
    if groups is None:
        raise Http404("No flow has this id.")
    return render(request, "dashboard/flow.html#groups", {"v": groups, "g": groups})


@require_GET
@login_required
def flow_graph(request: HttpRequest, flow_id: str) -> JsonResponse:
    hops, err = _hops(request)
    if err:
        return JsonResponse({"error": err, "field": "hops"}, status=400)
    view, _ = _view(request, flow_id)
    return JsonResponse(view.data)


@require_GET
@login_required
def flow_states(request: HttpRequest, flow_id: str) -> JsonResponse:
    hops, err = _hops(request)
    if err:
        return JsonResponse({"error": err, "field": "hops"}, status=400)
    data = sel.flow_states(get_backend(), lookup.flow_id(flow_id), focus=request.GET.get("focus") or None, hops=hops)
    if data is None:
        raise Http404("No flow has this id.")
    return JsonResponse(data)


@require_POST
@operator_required
def cancel_flow(request: HttpRequest, flow_id: str) -> HttpResponse:
    fid = lookup.flow_id(flow_id)
    form = ReasonForm.bind(request, prefix="cancel")
    ctx: dict[str, Any] = {"form": form, "flow_id": fid}
    status = 400
    if form.is_valid():
        result = flow_actions.cancel_flow(get_backend(), request.user.get_username(), fid,
                                          form.cleaned_data["reason"])
        ctx.update({"result": result, "form": ReasonForm(prefix="cancel") if result.ok else form})
        status = result.status
    if request.htmx:
        return render(request, "dashboard/flow.html#cancel", ctx, status=status)
    view, _ = _view(request, fid)
    return render(request, "dashboard/flow.html", {**ctx, "v": view, "g": view.graph, "errors": {},
                                                   "members_qs": _members_qs(request, view), "states": STATE_ORDER,
                                                   "terminal_flow_states": TERMINAL_FLOW_STATES},
                  status=status)


urlpatterns: list[Any] = [
    path("flows/", flows, name="flows"),
    path("flows/<str:flow_id>/", flow, name="flow"),
    path("flows/<str:flow_id>/graph.json", flow_graph, name="flow_graph"),
    path("flows/<str:flow_id>/counts", flow_counts, name="flow_counts"),
    path("flows/<str:flow_id>/groups", flow_groups, name="flow_groups"),
    path("flows/<str:flow_id>/states.json", flow_states, name="flow_states"),
    path("flows/<str:flow_id>/cancel", cancel_flow, name="flow_cancel"),
]
