"""Pages: flows list, the DAG view (graph JSON + live states), cancel flow."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import path, reverse
from django.views.decorators.http import require_GET, require_POST

from ffcore.errors import InvalidId, InvalidInput
from ffcore.ids import parse_flow_id
from ffcore.listing import parse_cursor

from ..access import operator_required
from ..actions import flows as flow_actions
from ..engine import get_backend
from ..forms import ReasonForm
from ..selectors import flows as sel


def _flow_id(flow_id: str) -> str:
    try:
        return parse_flow_id(flow_id)
    except InvalidId:
        raise Http404(f"{flow_id!r} is not a flow id") from None


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


def _view(request: HttpRequest, flow_id: str) -> tuple[sel.FlowView, dict[str, str]]:
    hops, err = _hops(request)
    view = sel.flow_view(get_backend(), _flow_id(flow_id), focus=request.GET.get("focus") or None, hops=hops,
                         href=reverse("execution", args=["EID"]).replace("EID", "{}"))
    if view is None:
        raise Http404("No flow has this id.")
    return view, ({"hops": err} if err else {})


@require_GET
@login_required
def flow(request: HttpRequest, flow_id: str) -> HttpResponse:
    view, errors = _view(request, flow_id)
    return render(request, "dashboard/flow.html", {"v": view, "g": view.graph, "errors": errors,
                                                   "flow_id": view.graph.flow_id, "form": ReasonForm(prefix="cancel")},
                  status=400 if errors else 200)


@require_GET
@login_required
def flow_graph(request: HttpRequest, flow_id: str) -> JsonResponse:
    view, errors = _view(request, flow_id)
    if errors:
        return JsonResponse({"error": errors["hops"]}, status=400)
    return JsonResponse(view.data)


@require_GET
@login_required
def flow_states(request: HttpRequest, flow_id: str) -> JsonResponse:
    data = sel.flow_states(get_backend(), _flow_id(flow_id))
    if data is None:
        raise Http404("No flow has this id.")
    return JsonResponse(data)


@require_POST
@operator_required
def cancel_flow(request: HttpRequest, flow_id: str) -> HttpResponse:
    fid = _flow_id(flow_id)
    form = ReasonForm(request.POST, prefix="cancel")
    ctx: dict[str, Any] = {"form": form, "flow_id": fid}
    status = 400
    if form.is_valid():
        result = flow_actions.cancel_flow(get_backend(), request.user.get_username(), fid,
                                          form.cleaned_data["reason"])
        ctx.update({"result": result, "form": ReasonForm(prefix="cancel") if result.ok else form})
        status = 200 if result.ok else 409
    if request.htmx:
        return render(request, "dashboard/flow.html#cancel", ctx, status=status)
    view, _ = _view(request, fid)
    return render(request, "dashboard/flow.html", {**ctx, "v": view, "g": view.graph, "errors": {}}, status=status)


urlpatterns: list[Any] = [
    path("flows/", flows, name="flows"),
    path("flows/<str:flow_id>/", flow, name="flow"),
    path("flows/<str:flow_id>/graph.json", flow_graph, name="flow_graph"),
    path("flows/<str:flow_id>/states.json", flow_states, name="flow_states"),
    path("flows/<str:flow_id>/cancel", cancel_flow, name="flow_cancel"),
]
