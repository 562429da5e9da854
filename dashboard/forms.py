"""Operator action forms: every action needs a reason."""

from __future__ import annotations

from django import forms


class ReasonForm(forms.Form):
    reason = forms.CharField(max_length=500, strip=True,
                             error_messages={"required": "Give a reason for the audit log."})


class PriorityForm(ReasonForm):
    priority = forms.IntegerField(min_value=0, max_value=9000,
                                  error_messages={"invalid": "Priority must be a whole number from 0 to 9000."})


class BulkForm(ReasonForm):
    action = forms.ChoiceField(choices=[("cancel", "Cancel"), ("replay", "Replay")])


class BulkConfirmForm(BulkForm):
    #: The count the operator saw in the preview; a different count now means the set changed.
    confirm_count = forms.IntegerField(min_value=0)
