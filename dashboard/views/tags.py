"""Pages: set a tag on an execution or a flow (operations §3.2, §8.5; #24 item 4).

Both pages render `dashboard/_tags.html` (the tags and, for operators, a form to set one); a submission
answers that section (htmx) or a small page holding it, with errors next to their fields. The key rule
is checked here and again by the library; a refused or unknown target writes nothing.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import path, reverse
from django.views.decorators.http import require_POST

from ffcore.execution.tags import MAX_KEY_CHARS, MAX_VALUE_CHARS, TAG_KEY
from ffcore.flows.tags import read_flow_tags
from ffcore.keys import ExecKeys
from ffcore.reads import decode_map

from ..access import operator_required
from ..actions import tags as tag_actions
from ..backend import get_backend
from ..forms import ReasonForm
from . import lookup

KEY_RULE = ("Name a tag <caller>.<field>: a lowercase letter, then lowercase letters, digits or _, a dot, then the "
            "field (e.g. ops.owner).")


class TagForm(ReasonForm):
    key = forms.CharField(max_length=MAX_KEY_CHARS, strip=True, error_messages={
        "required": "Give the tag's name (e.g. ops.owner).",
        "max_length": f"A tag name has at most {MAX_KEY_CHARS} characters."})
    value = forms.CharField(max_length=MAX_VALUE_CHARS, strip=True, error_messages={
        "required": "Give the tag's value.",
        "max_length": f"A tag value has at most {MAX_VALUE_CHARS} characters."})

    def clean_key(self) -> str:
        key: str = self.cleaned_data["key"]
        if not TAG_KEY.match(key):
            raise forms.ValidationError(KEY_RULE)
        return key


def _answer(request: HttpRequest, ctx: dict[str, Any], status: int, page_url: str) -> HttpResponse:
    if request.htmx:
        return render(request, "dashboard/_tags.html", ctx, status=status)
    if status == 200:
        return HttpResponseRedirect(page_url, status=303)
    return render(request, "dashboard/tags_page.html", {**ctx, "page_url": page_url}, status=status)


def _submit(request: HttpRequest, run: Any) -> tuple[TagForm, Any, int]:
    form = TagForm.bind(request, prefix="tag")
    if not form.is_valid():
        return form, None, 400
    d = form.cleaned_data
    result = run(get_backend(), request.user.get_username(), d["key"], d["value"], d["reason"])
    return (TagForm(prefix="tag") if result.ok else form), result, result.status


@require_POST
@operator_required
def execution_tags(request: HttpRequest, eid: str) -> HttpResponse:
    e = lookup.execution_id(eid)
    form, result, status = _submit(request, lambda b, who, k, v, why: tag_actions.set_execution_tag(b, who, e, k, v,
                                                                                                     why))
    tags = dict(sorted(decode_map(get_backend().client.hgetall(ExecKeys(e).tags)).items()))
    ctx = {"tags": tags, "tag_url": reverse("execution_tags", args=[e]), "filter_url": reverse("executions"),
           "tag_form": form, "tag_result": result, "what": f"execution {e}"}
    return _answer(request, ctx, status, reverse("execution", args=[e]))


@require_POST
@operator_required
def flow_tags(request: HttpRequest, flow_id: str) -> HttpResponse:
    fid = lookup.flow_id(flow_id)
    form, result, status = _submit(request, lambda b, who, k, v, why: tag_actions.set_flow_tag(b, who, fid, k, v,
                                                                                                why))
    ctx = {"tags": read_flow_tags(get_backend(), fid), "tag_url": reverse("flow_tags", args=[fid]),
           "tag_form": form, "tag_result": result, "what": f"flow {fid}"}
    return _answer(request, ctx, status, reverse("flow", args=[fid]))


urlpatterns: list[Any] = [
    path("executions/<str:eid>/tags", execution_tags, name="execution_tags"),
    path("flows/<str:flow_id>/tags", flow_tags, name="flow_tags"),
]
