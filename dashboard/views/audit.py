"""The audit page: filters (actor, action, target, time window) and a bulk job folded into one row."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import path
from django.views.decorators.http import require_GET

from ffcore import audit

from .. import selectors
from ..backend import get_backend
from . import lookup

AUDIT_FILTERS = ("actor", "action", "target", "since", "until", "tz")


def _audit_time(value: str, tz_minutes: int) -> int:
    """A `datetime-local` value (the browser's zone, `tz` minutes behind UTC as JS reports it) -> epoch ms."""
    naive = datetime.fromisoformat(value)
    if naive.tzinfo is not None:
        return int(naive.timestamp() * 1000)
    return int((naive.replace(tzinfo=UTC) + timedelta(minutes=tz_minutes)).timestamp() * 1000)


def _audit_filter(request: HttpRequest) -> tuple[audit.AuditFilter, dict[str, str]]:
    g = request.GET
    errors: dict[str, str] = {}
    tz = 0
    if g.get("tz"):
        try:
            tz = int(g["tz"])
            if not -1440 <= tz <= 1440:
                raise ValueError
        except ValueError:
            errors["tz"] = "The time zone offset must be minutes from UTC (-1440..1440)."
            tz = 0
    bounds: dict[str, int | None] = {"since": None, "until": None}
    for name in bounds:
        raw = g.get(name, "").strip()
        if raw:
            try:
                bounds[name] = _audit_time(raw, tz)
            except ValueError:
                errors[name] = "Write a date and time like 2026-11-26T14:30."
    if bounds["since"] is not None and bounds["until"] is not None and bounds["since"] > bounds["until"]:
        errors["until"] = "The end of the window is before its start."
        bounds["until"] = None
    return audit.AuditFilter(actor=g.get("actor", "").strip(), action=g.get("action", "").strip(),
                             target=g.get("target", "").strip(), since_ms=bounds["since"],
                             until_ms=bounds["until"]), errors


@require_GET
@login_required
def audit_page(request: HttpRequest) -> HttpResponse:
    before = lookup.before_cursor(request)
    if isinstance(before, HttpResponse):
        return before
    f, errors = _audit_filter(request)
    pg = selectors.audit_page(get_backend(), f, before)
    filters = {k: v for k, v in request.GET.items() if k in AUDIT_FILTERS and v and k not in errors}
    template = "dashboard/audit.html#live" if request.htmx else "dashboard/audit.html"
    return render(request, template, {
        "page": pg, "f": f, "errors": errors, "filters": filters,
        "next_qs": urlencode({**filters, "before": pg.next_before}) if pg.next_before else ""},
        status=400 if errors else 200)


urlpatterns: list[Any] = [path("audit/", audit_page, name="audit")]
