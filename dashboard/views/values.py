"""An execution's input or result whole (#36): the page shows the first 64 KiB; these doors give the rest.

`?download=1` sends it as an attachment; without it, text is shown inline as text/plain (the browser's own
viewer: nothing in it can run, and nosniff stops a browser from guessing otherwise). Binary values are
always downloaded. Same access as the execution page: any signed-in user."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.urls import path
from django.views.decorators.http import require_GET

from ffcore.execution.client import Client

from ..backend import get_backend
from . import lookup

WHICH = ("payload", "result")


def _is_text(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@require_GET
@login_required
def value(request: HttpRequest, eid: str, which: str) -> HttpResponse:
    if which not in WHICH:
        raise Http404("Only an execution's payload or result can be read whole.")
    execution_id = lookup.execution_id(eid)
    c = Client(get_backend())
    if c.get_state(execution_id) is None:
        raise Http404("No execution has this id.")
    data = c.get_payload(execution_id) if which == "payload" else (c.get_result(execution_id) or b"")
    if not data:
        raise Http404(f"This execution has no {which}.")
    text = _is_text(data)
    download = request.GET.get("download") == "1" or not text
    r = HttpResponse(data, content_type="text/plain; charset=utf-8" if text and not download
                     else "application/octet-stream")
    name = f"{str(execution_id).rsplit(':', 1)[-1]}-{which}.{'txt' if text else 'bin'}"
    r["Content-Disposition"] = f'{"attachment" if download else "inline"}; filename="{name}"'
    r["X-Content-Type-Options"] = "nosniff"
    r["Cache-Control"] = "private, no-store"
    return r


urlpatterns: list[Any] = [path("executions/<str:eid>/<str:which>/whole", value, name="execution_value")]
