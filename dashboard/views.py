"""Thin page views: read through selectors, render templates."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from . import selectors
from .engine import get_backend


@require_GET
@login_required
def home(request: HttpRequest) -> HttpResponse:
    info = selectors.system_info(get_backend())
    return render(request, "dashboard/home.html", {"info": info})
