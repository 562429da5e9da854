"""Request helpers shared by the API tests."""

from __future__ import annotations

import json
from typing import Any

#: A well-formed execution id that names no execution.
MISSING_EID = "{fp:86}:6ba7b810-9dad-11d1-80b4-00c04fd430c8"
#: A well-formed UUID that names nothing (flows, budgets, waitpoints).
MISSING_UUID = "6ba7b811-9dad-11d1-80b4-00c04fd430c8"


def post(client: Any, path: str, body: Any, **extra: Any) -> Any:
    return client.post(path, json.dumps(body), content_type="application/json", **extra)


def keyspace(backend: Any) -> list[bytes]:
    """Every key (sorted): compared before and after a refused request to show nothing was written."""
    return sorted(backend.client.keys("*"))
