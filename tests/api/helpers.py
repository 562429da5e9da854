"""Request helpers shared by the API tests (keyspace snapshots and missing ids: tests.keyspace)."""

from __future__ import annotations

import json
from typing import Any


def post(client: Any, path: str, body: Any, **extra: Any) -> Any:
    return client.post(path, json.dumps(body), content_type="application/json", **extra)
