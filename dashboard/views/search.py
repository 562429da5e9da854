"""Search by id or id prefix, and saved views of the executions list (issue #25, item 3)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django import forms
from django.contrib.auth.decorators import login_required
from django.db import IntegrityError, transaction
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import path, reverse
from django.views.decorators.http import require_GET, require_POST

from ffcore.errors import InvalidId
from ffcore.execution import listing
from ffcore.execution import search as finder

from ..backend import get_backend
from ..forms import NOT_UTF8, REPLACEMENT_CHARACTER, not_utf8_fields
from ..models import SavedView

#: The executions list's filter parameters a saved view keeps.
VIEW_PARAMS = ("lane", "state", "kind", "tag", "limit", "order", "created_from", "created_to")
#: Saved views one user may keep.
MAX_VIEWS = 50


def target_url(found: finder.Found) -> str | None:
    """The page of what a search found (None for a prefix list or nothing)."""
    if found.kind == "execution":
        return reverse("execution", args=[found.target])
    if found.kind == "flow":
        return reverse("flow", args=[found.target])
    if found.kind == "waitpoint":
        return f"{reverse('waitpoints')}?{urlencode({'execution': found.target})}#wp-{found.waitpoint_id}"
    return None


@require_GET
@login_required
def search(request: HttpRequest) -> HttpResponse:
    """`?q=`: an id opens its page; a prefix lists the recent executions it matches; anything else is a 400."""
    q = request.GET.get("q", "").strip()
    ctx: dict[str, Any] = {"q": q, "errors": {}, "found": None, "rows": []}
    if not q:
        return render(request, "dashboard/search.html", ctx)
    try:
        found = finder.search(get_backend(), q)
    except InvalidId as e:
        ctx["errors"] = {"q": str(e)}
        return render(request, "dashboard/search.html", ctx, status=400)
    url = target_url(found)
    if url:
        return redirect(url)
    ctx["found"] = found
    if found.kind == "prefix":
        rows = listing.read_rows(get_backend(), found.matches)
        ctx["rows"] = [{**rows[e], "href": reverse("execution", args=[e])} for e in found.matches if e in rows]
        ctx["window"] = finder.RECENT_WINDOW
        return render(request, "dashboard/search.html", ctx)
    return render(request, "dashboard/search.html", ctx, status=404)


def jump(q: str) -> tuple[HttpResponse | None, str]:
    """The executions list's `?id=` box: (a redirect to what it names or to the search page, or an error)."""
    try:
        found = finder.search(get_backend(), q)
    except InvalidId as e:
        return None, str(e)
    url = target_url(found)
    if url:
        return redirect(url), ""
    if found.kind == "prefix":
        return redirect(f"{reverse('search')}?{urlencode({'q': q})}"), ""
    return None, f"Nothing has the id {q[:80]!r}: no execution, flow or waitpoint."


# ------------------------------------------------------------------ saved views
def clean_query(raw: str) -> tuple[str, str]:
    """A list query string reduced to the filters a view keeps, checked like the list checks them: (query, error)."""
    qd = QueryDict(raw, mutable=False)
    keep = {k: qd[k].strip() for k in VIEW_PARAMS if qd.get(k, "").strip()}
    if keep.get("state") and keep["state"] not in listing.STATE_INDEXES:
        return "", f"Unknown state {keep['state']!r}."
    if keep.get("tag") and "=" not in keep["tag"]:
        return "", "Write a tag filter as key=value."
    if "limit" in keep and not (keep["limit"].isdigit() and 1 <= int(keep["limit"]) <= 500):
        return "", "Limit must be a whole number from 1 to 500."
    return urlencode(keep), ""


class SavedViewForm(forms.Form):
    name = forms.CharField(max_length=80, strip=True, error_messages={"required": "Name the view."})
    query = forms.CharField(max_length=1000, strip=True,
                            error_messages={"required": "Filter the list first: a view keeps at least one filter."})
    not_utf8: frozenset[str] = frozenset()

    def clean(self) -> dict[str, Any]:
        cleaned: dict[str, Any] = super().clean() or {}
        for name in self.fields:
            raw = self[name].data
            if (name in self.not_utf8 or (isinstance(raw, str) and REPLACEMENT_CHARACTER in raw)) and \
                    name not in self.errors:
                self.add_error(name, NOT_UTF8)
        if "query" in cleaned and "query" not in self.errors:
            query, error = clean_query(cleaned["query"])
            if not error and not query:
                error = "Filter the list first: a view keeps at least one filter."
            if error:
                self.add_error("query", error)
            else:
                cleaned["query"] = query
        return cleaned


def _executions_with(request: HttpRequest, ctx: dict[str, Any], status: int) -> HttpResponse:
    """The saved-views box of the executions page (htmx), or the list page it belongs to."""
    ctx["saved_views"] = list(SavedView.objects.filter(user=request.user))
    if request.htmx:
        return render(request, "dashboard/executions.html#saved", ctx, status=status)
    back = ctx.get("filter_qs") or ""
    return redirect(f"{reverse('executions')}?{back}" if back else reverse("executions"))


@require_POST
@login_required
def save_view(request: HttpRequest) -> HttpResponse:
    form = SavedViewForm(request.POST)
    form.not_utf8 = not_utf8_fields(request)
    ctx: dict[str, Any] = {"view_form": form, "filter_qs": request.POST.get("query", "")}
    if not form.is_valid():
        # Keep the list's filter for the retry (only a filter that itself fails the check is dropped).
        ctx["filter_qs"] = clean_query(request.POST.get("query", ""))[0]
        return _saved_error(request, ctx)
    if SavedView.objects.filter(user=request.user).count() >= MAX_VIEWS:
        form.add_error("name", f"You keep {MAX_VIEWS} views already; delete one first.")
        return _saved_error(request, ctx)
    try:
        with transaction.atomic():
            SavedView.objects.create(user=request.user, name=form.cleaned_data["name"],
                                     query=form.cleaned_data["query"])
    except IntegrityError:
        form.add_error("name", "You already have a view with this name.")
        return _saved_error(request, ctx)
    ctx.update({"view_form": SavedViewForm(), "filter_qs": form.cleaned_data["query"],
                "saved_message": f"Saved “{form.cleaned_data['name']}”."})
    return _executions_with(request, ctx, 200)


def _saved_error(request: HttpRequest, ctx: dict[str, Any]) -> HttpResponse:
    ctx["saved_views"] = list(SavedView.objects.filter(user=request.user))
    return render(request, "dashboard/executions.html#saved", ctx, status=400)


@require_POST
@login_required
def delete_view(request: HttpRequest, view_id: int) -> HttpResponse:
    # Read the (empty) form like every other form does: an unreadable body is a 400 before anything is deleted.
    request.POST  # noqa: B018
    deleted, _ = SavedView.objects.filter(user=request.user, pk=view_id).delete()
    if not deleted:  # someone else's view, or one deleted already: the same answer
        ctx = {"view_form": SavedViewForm(), "saved_views": list(SavedView.objects.filter(user=request.user)),
               "saved_error": "You have no saved view with this id (deleted already?)."}
        return render(request, "dashboard/executions.html#saved", ctx, status=404)
    return _executions_with(request, {"view_form": SavedViewForm(), "saved_message": "View deleted."}, 200)


urlpatterns: list[Any] = [
    path("search/", search, name="search"),
    path("saved-views/", save_view, name="view_save"),
    path("saved-views/<int:view_id>/delete", delete_view, name="view_delete"),
]
