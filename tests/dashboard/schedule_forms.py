"""Posting a schedule page's prefixed form, as the browser does (optionally as htmx)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

FORM = "application/x-www-form-urlencoded"


def post(c: Any, url: str, data: dict[str, str], prefix: str, htmx: bool = False) -> Any:
    body = urlencode({f"{prefix}-{k}": v for k, v in data.items()})
    return c.post(url, body, content_type=FORM, **({"HTTP_HX_REQUEST": "true"} if htmx else {}))
