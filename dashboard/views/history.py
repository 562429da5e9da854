"""Pages: an execution's or a flow's History past its first page (their own pages show the first)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import path, reverse
from django.views.decorators.http import require_GET

from ffcore.execution import history
from ffcore.flows import history as fhistory

from ..backend import get_backend
from . import lookup


def _history_page(request: HttpRequest, page: Any, subject: str, back: str, missing: str) -> HttpResponse:
    if page is None:
        raise Http404(missing)
    return render(request, "dashboard/history.html",
                  {"subject": subject, "back_url": reverse(back, args=[subject]), "h": page})


@require_GET
@login_required
def execution_history(request: HttpRequest, eid: str) -> HttpResponse:
    eid = lookup.execution_id(eid)
    page = history.page(get_backend(), eid, request.GET.get("cursor", "")[:12])
    return _history_page(request, page, eid, "execution", "No execution has this id.")


@require_GET
@login_required
def flow_history(request: HttpRequest, flow_id: str) -> HttpResponse:
    flow_id = lookup.flow_id(flow_id)
    page = fhistory.page(get_backend(), flow_id, request.GET.get("cursor", "")[:12])
    return _history_page(request, page, flow_id, "flow", "No flow has this id.")


urlpatterns: list[Any] = [path("executions/<str:eid>/history", execution_history, name="execution_history"),
                          path("flows/<str:flow_id>/history", flow_history, name="flow_history")]
