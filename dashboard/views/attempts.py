"""Page: a diff between two attempts of one execution (linked from the attempts table)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import path
from django.views.decorators.http import require_GET

from ..backend import get_backend
from ..selectors.attempts import attempt_diff
from . import lookup


def _index(request: HttpRequest, name: str, errors: dict[str, str]) -> int:
    raw = request.GET.get(name, "").strip()
    if not raw.isdigit() or len(raw) > 6:
        errors[name] = f"{name}: an attempt number (0, 1, 2, …)."
        return -1
    return int(raw)


@require_GET
@login_required
def diff(request: HttpRequest, eid: str) -> HttpResponse:
    eid = lookup.execution_id(eid)
    errors: dict[str, str] = {}
    a, b = _index(request, "a", errors), _index(request, "b", errors)
    if errors:
        return render(request, "dashboard/attempt_diff.html", {"eid": eid, "errors": errors}, status=400)
    d = attempt_diff(get_backend(), eid, a, b)
    if d is None:
        raise Http404("No such execution, or it has no attempt with that number.")
    return render(request, "dashboard/attempt_diff.html", {"eid": eid, "d": d, "errors": {}})


urlpatterns: list[Any] = [path("executions/<str:eid>/attempts/diff", diff, name="attempt_diff")]
