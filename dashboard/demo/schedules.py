"""The demo's two recurring schedules (#26): an interval one every 10 s and a cron one in a time zone."""

from __future__ import annotations

import json

from ffcore.backend import Backend
from ffcore.execution.client import Client

from .ids import TOKEN_BUDGET

SCHEDULES = [
    {"name": "inbox-sweep", "kind": "extract", "lane": "demo", "interval_ms": 10_000, "overlap": "skip",
     "payload": json.dumps({"source": "inbox"})},
    {"name": "incident-summary", "kind": "llm", "lane": "llm", "cron": "*/2 * * * *", "timezone": "Europe/Paris",
     "overlap": "skip", "catchup": "skip", "payload": json.dumps({"prompt": "Summarise the open incidents"}),
     "policy": {"budget_ids": [TOKEN_BUDGET]}},
]


def setup(backend: Backend) -> None:
    """Create the demo schedules unless a previous run did (they live in Valkey with the rest)."""
    schedules = Client(backend).schedules
    for spec in SCHEDULES:
        if schedules.by_name(str(spec["name"])) is None:
            schedules.create(**spec, by="demo")
