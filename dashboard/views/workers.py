"""The Workers page: every registered worker, live, stale or gone."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import path
from django.views.decorators.http import require_GET

from ..backend import get_backend
from ..selectors.workers import workers_view


@require_GET
@login_required
def workers(request: HttpRequest) -> HttpResponse:
    v = workers_view(get_backend())
    template = "dashboard/workers.html#live" if request.htmx else "dashboard/workers.html"
    return render(request, template, {"v": v})


urlpatterns: list[Any] = [path("workers/", workers, name="workers")]
