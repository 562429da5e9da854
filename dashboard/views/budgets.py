"""Pages: budgets (gauges per dimension, burn rate, reset) and quotas (window and concurrency)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import path
from django.views.decorators.http import require_GET, require_POST

from ffcore.errors import InvalidId
from ffcore.ids import parse_budget_id, parse_quota_id

from ..access import operator_required
from ..actions import budgets as budget_actions
from ..backend import get_backend
from ..forms import ReasonForm
from ..selectors import budgets as sel


def _id(parse: Any, value: str, what: str) -> str:
    try:
        return str(parse(value))
    except InvalidId:
        raise Http404(f"{value!r} is not a {what} id") from None


@require_GET
@login_required
def budgets(request: HttpRequest) -> HttpResponse:
    cards, now = sel.budgets_page(get_backend())
    template = "dashboard/budgets.html#cards" if request.htmx else "dashboard/budgets.html"
    return render(request, template, {"cards": cards, "now_ms": now, "single": False,
                                      "form": ReasonForm(prefix="reset")})


def _budget_ctx(budget_id: str, form: ReasonForm | None = None, result: Any = None) -> dict[str, Any]:
    card, now = sel.budget_page(get_backend(), budget_id)
    if card is None:
        raise Http404("No budget has this id.")
    return {"cards": [card], "card": card, "now_ms": now, "single": True, "form": form or ReasonForm(prefix="reset"),
            "result": result}


@require_GET
@login_required
def budget(request: HttpRequest, budget_id: str) -> HttpResponse:
    ctx = _budget_ctx(_id(parse_budget_id, budget_id, "budget"))
    template = "dashboard/budgets.html#cards" if request.htmx else "dashboard/budgets.html"
    return render(request, template, ctx)


@require_POST
@operator_required
def reset(request: HttpRequest, budget_id: str) -> HttpResponse:
    bid = _id(parse_budget_id, budget_id, "budget")
    form = ReasonForm.bind(request, prefix="reset")
    result, status = None, 400
    if form.is_valid():
        result = budget_actions.reset_budget(get_backend(), request.user.get_username(), bid,
                                             form.cleaned_data["reason"])
        status = result.status
    ctx = _budget_ctx(bid, form if result is None or not result.ok else None, result)
    template = "dashboard/budgets.html#reset" if request.htmx else "dashboard/budgets.html"
    return render(request, template, ctx, status=status)


@require_GET
@login_required
def quotas(request: HttpRequest) -> HttpResponse:
    cards, now = sel.quotas_page(get_backend())
    template = "dashboard/quotas.html#cards" if request.htmx else "dashboard/quotas.html"
    return render(request, template, {"cards": cards, "now_ms": now, "single": False})


@require_GET
@login_required
def quota(request: HttpRequest, quota_id: str) -> HttpResponse:
    card, now = sel.quota_page(get_backend(), _id(parse_quota_id, quota_id, "quota policy"))
    if card is None:
        raise Http404("No quota policy has this id.")
    template = "dashboard/quotas.html#cards" if request.htmx else "dashboard/quotas.html"
    return render(request, template, {"cards": [card], "card": card, "now_ms": now, "single": True})


urlpatterns: list[Any] = [
    path("budgets/", budgets, name="budgets"),
    path("budgets/<str:budget_id>/", budget, name="budget"),
    path("budgets/<str:budget_id>/reset", reset, name="budget_reset"),
    path("quotas/", quotas, name="quotas"),
    path("quotas/<str:quota_id>/", quota, name="quota"),
]
