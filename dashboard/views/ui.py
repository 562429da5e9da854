"""Small page-wide doors: the dark/light choice (stored per user in the database) and the favicon."""

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


def user_theme(request: HttpRequest) -> str:
    """The signed-in user's stored theme ("auto" when none), read once per request."""
    cached = getattr(request, "_ff_theme", None)
    if cached is not None:
        return str(cached)
    from ..models import UserPreference

    user = getattr(request, "user", None)
    theme = "auto"
    if user is not None and user.is_authenticated:
        theme = UserPreference.objects.filter(user=user).values_list("theme", flat=True).first() or "auto"
    request._ff_theme = theme if theme in THEMES else "auto"  # type: ignore[attr-defined]
    return str(request._ff_theme)  # type: ignore[attr-defined]


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
    from ..models import UserPreference

    # Kept with the account: the choice follows the user to any browser.
    UserPreference.objects.update_or_create(user=request.user, defaults={"theme": theme})
    return HttpResponse("") if request.headers.get("HX-Request") else redirect(nxt)


@require_GET
def favicon(request: HttpRequest) -> HttpResponse:
    # Browsers ask for /favicon.ico whatever the page links; send them to the real icon.
    return redirect(static("dashboard/favicon.svg"), permanent=True)


urlpatterns: list[Any] = [
    path("theme", set_theme, name="theme"),
    path("favicon.ico", favicon, name="favicon"),
]
