"""Small page-wide doors: the remembered dark/light choice and the favicon."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect
from django.templatetags.static import static
from django.urls import path
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

THEMES = ("auto", "light", "dark")
#: A year: the choice outlives sessions (it is per user and per browser).
THEME_COOKIE_AGE_S = 365 * 86_400


def theme_cookie(user: Any) -> str:
    """One cookie per user, so two people sharing a browser keep their own choice."""
    return f"ff_theme_{user.pk}"


@require_POST
@login_required
def set_theme(request: HttpRequest) -> HttpResponse:
    theme = request.POST.get("theme", "")
    if theme not in THEMES:
        return HttpResponseBadRequest('<p class="error" data-error="theme">Choose auto, light or dark.</p>')
    nxt = request.POST.get("next") or request.META.get("HTTP_REFERER") or "/"
    if not url_has_allowed_host_and_scheme(nxt, allowed_hosts={request.get_host()}):
        nxt = "/"
    # A script's request (ui.js) needs no page back; a plain form post returns to where it came from.
    resp: HttpResponse = HttpResponse("") if request.headers.get("HX-Request") else redirect(nxt)
    resp.set_cookie(theme_cookie(request.user), theme, max_age=THEME_COOKIE_AGE_S, samesite="Lax", httponly=True,
                    secure=request.is_secure())
    return resp


@require_GET
def favicon(request: HttpRequest) -> HttpResponse:
    # Browsers ask for /favicon.ico whatever the page links; send them to the real icon.
    return redirect(static("dashboard/favicon.svg"), permanent=True)


urlpatterns: list[Any] = [
    path("theme", set_theme, name="theme"),
    path("favicon.ico", favicon, name="favicon"),
]
