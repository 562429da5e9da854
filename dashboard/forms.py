"""Operator action forms: every action needs a reason."""

from __future__ import annotations

from typing import Any, Self
from urllib.parse import unquote_to_bytes

from django import forms
from django.http import HttpRequest

#: Multipart values and percent-escapes that are not UTF-8 reach a form as U+FFFD (Django decodes them with
#: errors="replace"). Nobody types it, so a value holding it is refused instead of being stored mangled.
REPLACEMENT_CHARACTER = "\ufffd"
NOT_UTF8 = "This is not valid UTF-8 text; retype it."


def not_utf8_fields(request: HttpRequest) -> frozenset[str]:
    """Names of the url-encoded fields whose value is not UTF-8.

    Django decodes such a body as Latin-1 without telling the view, so the bytes would pass as (wrong) text."""
    declared = (request.encoding or "utf-8").lower().replace("-", "")
    if request.content_type != "application/x-www-form-urlencoded" or declared != "utf8":
        return frozenset()  # multipart gets U+FFFD instead; a declared charset other than UTF-8 is honoured
    bad = set()
    for pair in request.body.split(b"&"):
        name, _, value = pair.partition(b"=")
        try:
            unquote_to_bytes(value.replace(b"+", b" ")).decode()
        except UnicodeDecodeError:
            bad.add(unquote_to_bytes(name.replace(b"+", b" ")).decode(errors="replace"))
    return frozenset(bad)


class ReasonForm(forms.Form):
    reason = forms.CharField(max_length=500, strip=True,
                             error_messages={"required": "Give a reason for the audit log."})
    #: Set by `bind`: the submitted field names whose bytes were not UTF-8.
    not_utf8: frozenset[str] = frozenset()

    @classmethod
    def bind(cls, request: HttpRequest, **kwargs: Any) -> Self:
        """The form bound to the POST body, knowing which fields arrived as bytes that are not UTF-8."""
        form = cls(request.POST, **kwargs)
        form.not_utf8 = not_utf8_fields(request)
        return form

    def clean(self) -> dict[str, Any]:
        cleaned: dict[str, Any] = super().clean() or {}
        for name in self.fields:
            raw = self[name].data
            bad = self.add_prefix(name) in self.not_utf8 or (isinstance(raw, str) and REPLACEMENT_CHARACTER in raw)
            if bad and name not in self.errors:
                self.add_error(name, NOT_UTF8)
        return cleaned


class PriorityForm(ReasonForm):
    priority = forms.IntegerField(min_value=0, max_value=9000,
                                  error_messages={"invalid": "Priority must be a whole number from 0 to 9000."})


class TakeForm(ReasonForm):
    """"Take now" (ff_issue_grant_and_claim): how long the operator's lease holds."""

    lease_seconds = forms.IntegerField(min_value=1, max_value=3600, initial=60, error_messages={
        "required": "Give the lease length in seconds (1 to 3600).",
        "invalid": "The lease must be a whole number of seconds from 1 to 3600.",
        "min_value": "The lease must be a whole number of seconds from 1 to 3600.",
        "max_value": "The lease must be a whole number of seconds from 1 to 3600."})


class BulkForm(ReasonForm):
    action = forms.ChoiceField(choices=[("cancel", "Cancel"), ("replay", "Replay")])


class BulkConfirmForm(BulkForm):
    #: The count the operator saw in the preview; a different count now means the set changed.
    confirm_count = forms.IntegerField(min_value=0, error_messages={
        "required": "The count to confirm is missing; preview again.",
        "invalid": "The count to confirm must be a whole number; preview again."})
