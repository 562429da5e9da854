"""Shared API schemas and the payload codec (upstream's integer arrays, or base64)."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from django.http import HttpRequest
from ninja import Schema
from ninja.parser import Parser
from pydantic import Field, field_validator, model_validator


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


class ObjectParser(Parser):
    """Strict JSON bodies: an object (ninja would read `[1]`, `"x"` or `null` as an empty object), and no
    NaN/Infinity. A refusal becomes the 400 "invalid JSON" answer."""

    def parse_body(self, request: HttpRequest) -> Any:
        data = json.loads(request.body, parse_constant=_no_constant)
        if not isinstance(data, dict):
            raise ValueError("the request body must be a JSON object")
        return data


#: An optional reason on every write body: stored in the audit entry when given.
REASON = Field(default=None, max_length=1000, description="Why (optional); kept in the audit trail")


class ReasonIn(Schema):
    """The body of a write that needs nothing else (replay, revoke, reset): an optional reason."""

    reason: str | None = REASON


class Error(Schema):
    error: str
    kind: str | None = None
    retryable: bool | None = None


class Payload(Schema):
    """Binary data: `<name>` as an array of byte values 0..255 (upstream form) or `<name>_b64`."""

    @staticmethod
    def decode(ints: list[int] | None, b64: str | None, field: str) -> bytes:
        if ints is not None and b64 is not None:
            raise ValueError(f"{field}: send either {field} or {field}_b64, not both")
        if b64 is not None:
            try:
                return base64.b64decode(b64, validate=True)
            except (binascii.Error, ValueError):
                raise ValueError(f"{field}_b64 is not valid base64") from None
        return bytes(ints or [])


class PayloadChecks(Schema):
    """The checks of each payload form on its own (bytes 0..255; valid base64), for a schema that declares
    `payload` and `payload_b64`; the check across both stays with the schema."""

    @field_validator("payload", check_fields=False)
    @classmethod
    def _bytes(cls, v: list[int] | None) -> list[int] | None:
        return byte_values(v)

    @field_validator("payload_b64", check_fields=False)
    @classmethod
    def _b64(cls, v: str | None) -> str | None:
        if v is not None:
            Payload.decode(None, v, "payload")
        return v


def byte_values(v: list[int] | None) -> list[int] | None:
    """Validator body for an integer-array byte field."""
    if v is not None and any(not 0 <= b <= 255 for b in v):
        raise ValueError("every element must be a byte value 0..255")
    return v


class BytesIn(Schema):
    input_payload: list[int] | None = None
    input_payload_b64: str | None = None

    @field_validator("input_payload")
    @classmethod
    def _bytes(cls, v: list[int] | None) -> list[int] | None:
        return byte_values(v)

    @field_validator("input_payload_b64")
    @classmethod
    def _b64(cls, v: str | None) -> str | None:
        if v is not None:
            Payload.decode(None, v, "input_payload")
        return v

    @model_validator(mode="after")
    def _one_form(self) -> BytesIn:
        Payload.decode(self.input_payload, self.input_payload_b64, "input_payload")
        return self

    def payload_bytes(self) -> bytes:
        return Payload.decode(self.input_payload, self.input_payload_b64, "input_payload")
