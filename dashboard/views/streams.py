"""Pages: the live tail of an attempt stream, "load earlier", one frame in full."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import path
from django.views.decorators.http import require_GET

from ffcore.errors import InvalidInput
from ffcore.streams.streams import check_id

from ..backend import get_backend
from ..selectors import streams as sel
from . import lookup


@require_GET
@login_required
def stream(request: HttpRequest, eid: str, attempt: int) -> HttpResponse:
    before = lookup.before_cursor(request)
    if isinstance(before, HttpResponse):
        return before
    page = sel.stream_page(get_backend(), lookup.execution_id(eid), attempt, before=before)
    if page is None:
        raise Http404("No execution has this id.")
    if request.htmx and before:
        return render(request, "dashboard/stream.html#earlier", {"s": page})
    return render(request, "dashboard/stream.html", {"s": page})


@require_GET
@login_required
def stream_frame(request: HttpRequest, eid: str, attempt: int, frame_id: str) -> HttpResponse:
    try:
        check_id(frame_id, "frame id")
    except InvalidInput:
        raise Http404("not a frame id") from None
    f = sel.full_frame(get_backend(), lookup.execution_id(eid), attempt, frame_id)
    if f is None:
        raise Http404("This frame is gone (trimmed or the stream was deleted).")
    return render(request, "dashboard/stream.html#frame", {"f": f, "eid": eid, "attempt": attempt})


urlpatterns = [
    path("executions/<str:eid>/attempts/<int:attempt>/stream/", stream, name="stream"),
    path("executions/<str:eid>/attempts/<int:attempt>/stream/frames/<str:frame_id>", stream_frame,
         name="stream_frame"),
]
