"""Live rows of the executions list (issue #25, item 1): the rows a pushed change touched, re-rendered.

The list page asks for the rows it shows whose executions changed (`?ids=` plus its own filters) and
swaps each in place. A row that no longer matches the filter comes back marked ("left the filter"),
not removed, so nothing jumps under the reader's eyes; one whose execution is gone is marked too.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import path
from django.views.decorators.http import require_GET

from ffcore.errors import InvalidId
from ffcore.execution import listing
from ffcore.ids import ExecutionId

from ..backend import get_backend

#: Rows one request re-renders at most (the page sends the rest in further requests).
MAX_ROWS = 100


@require_GET
@login_required
def rows(request: HttpRequest) -> HttpResponse:
    from . import _query, decorate_rows, link_rows  # the list's own filter parsing and row links

    q, errors = _query(request)
    raw = [e for e in request.GET.get("ids", "").split(",") if e]
    eids: list[str] = []
    if not raw:
        errors["ids"] = "Name the rows to refresh: ids=<execution id>,..."
    elif len(raw) > MAX_ROWS:
        errors["ids"] = f"At most {MAX_ROWS} rows at once."
    else:
        try:
            eids = [str(ExecutionId(e)) for e in raw]
        except InvalidId as e:
            errors["ids"] = str(e)
    if errors:
        return render(request, "dashboard/executions.html#row_errors", {"errors": errors}, status=400)
    backend = get_backend()
    found = listing.read_rows(backend, eids)
    tags = listing.read_tag_values(backend, list(found), q.tag[0]) if q.tag else {}
    out: list[dict[str, Any]] = []
    for e in eids:
        row = found.get(e)
        if row is None:
            out.append({"execution_id": e, "gone": True})
            continue
        row["left"] = not listing.row_matches(row, q, {q.tag[0]: tags.get(e, "")} if q.tag else None)
        out.append(row)
    link_rows(out)
    shown = [r["execution_id"] for r in out if not r.get("gone")]
    decorate_rows([r for r in out if not r.get("gone")], backend.now_ms(), listing.read_tags(backend, shown))
    return render(request, "dashboard/executions.html#live_rows", {"rows": out})


urlpatterns: list[Any] = [path("live/rows/", rows, name="execution_rows")]
