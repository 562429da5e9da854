"""Page: an execution's History past its first page (the execution page shows the first)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import path
from django.views.decorators.http import require_GET

from ffcore.execution import history

from ..backend import get_backend
from . import lookup


@require_GET
@login_required
def execution_history(request: HttpRequest, eid: str) -> HttpResponse:
    eid = lookup.execution_id(eid)
    page = history.page(get_backend(), eid, request.GET.get("cursor", "")[:12])
    if page is None:
        raise Http404("No execution has this id.")
    return render(request, "dashboard/execution_history.html", {"eid": eid, "h": page})


urlpatterns: list[Any] = [path("executions/<str:eid>/history", execution_history, name="execution_history")]
