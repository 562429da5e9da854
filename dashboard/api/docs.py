"""Who may read the API's docs page (/api/docs) and schema (/api/openapi.json): any signed-in user, or a
caller with the API bearer token. Tokenless loopback callers may not: the docs are a page like every other.

Used as the NinjaAPI's `docs_decorator`, which ninja applies to both views (they bypass the API's `auth`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse, JsonResponse

from .access import has_token


def docs_access(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Signed in or bearer token; else a wrong token is a 401 and anyone else is sent to sign in."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if request.user.is_authenticated or has_token(request):
            return view(request, *args, **kwargs)
        if "Authorization" in request.headers:
            return JsonResponse({"detail": "missing or invalid Authorization header"}, status=401)
        return redirect_to_login(request.get_full_path())

    return wrapped
