"""Operator forms of the waitpoints inbox: signal (name + JSON payload), resume, close — all need a reason."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from django import forms

from .forms import ReasonForm

#: Largest signal payload an operator may send (bytes of JSON text).
MAX_PAYLOAD_BYTES = 64 * 1024
_NAME = re.compile(r"^[^\x00-\x1f\x7f]{1,200}\Z")
_IDEM = re.compile(r"^[A-Za-z0-9_.-]{1,100}\Z")


def _no_constant(name: str) -> Any:
    # Python's json accepts NaN / Infinity; they are not JSON, and other readers of the payload reject them.
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"{text} is out of range for a JSON number")
    return value


class SignalForm(ReasonForm):
    name = forms.CharField(max_length=200, strip=True,
                           error_messages={"required": "Name the signal (e.g. approved)."})
    payload = forms.CharField(required=False, strip=True, widget=forms.Textarea)
    #: Minted when the form is shown, so a double submit is delivered once (signal dedup).
    idempotency_key = forms.CharField(required=False, max_length=100)

    def clean_name(self) -> str:
        name: str = self.cleaned_data["name"]
        if not _NAME.match(name):
            raise forms.ValidationError("A signal name is 1-200 characters without control characters.")
        return name

    def clean_payload(self) -> bytes:
        raw: str = self.cleaned_data.get("payload") or ""
        if not raw:
            return b""
        data = raw.encode()
        if len(data) > MAX_PAYLOAD_BYTES:
            raise forms.ValidationError(f"The payload is {len(data)} bytes; at most {MAX_PAYLOAD_BYTES} are allowed.")
        try:
            value: Any = json.loads(raw, parse_constant=_no_constant, parse_float=_finite)
            # Stored compact, so what the worker reads is exactly the JSON the operator meant.
            return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
        except RecursionError:
            raise forms.ValidationError("The payload is nested too deeply.") from None
        except UnicodeEncodeError:  # a lone surrogate escape ("\ud800") decodes, but is not Unicode text
            raise forms.ValidationError("The payload holds an unpaired surrogate escape (\\ud800-\\udfff).") from None
        except ValueError as e:
            raise forms.ValidationError(f"The payload is not valid JSON: {e}.") from None

    def clean_idempotency_key(self) -> str:
        key: str = self.cleaned_data.get("idempotency_key") or ""
        if key and not _IDEM.match(key):
            raise forms.ValidationError("Malformed form token; reload the page.")
        return key


class BulkSignalForm(SignalForm):
    """One signal to many waitpoints: the rows ticked in the inbox (`sel`, "<execution id> <waitpoint id>") or
    every waitpoint matching the inbox filters."""

    mode = forms.ChoiceField(choices=[("selected", "the selected rows"), ("filter", "every row of this filter")],
                             error_messages={"required": "Choose the selected rows or the whole filter."})
    #: The count the operator saw in the preview (the confirm step only).
    confirm_count = forms.IntegerField(required=False, min_value=0, error_messages={
        "invalid": "The count to confirm must be a whole number; preview again."})
