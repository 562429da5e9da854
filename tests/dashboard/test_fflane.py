"""`manage.py fflane` (issue #23): shows and sets a lane's spread, audits the change, refuses bad input."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from ffcore import audit, keys
from ffcore.partition import spread_partitions


def _run(*args: str) -> str:
    out = io.StringIO()
    call_command("fflane", *args, stdout=out)
    return out.getvalue()


def test_fflane_sets_shows_and_audits_a_spread(dashboard_backend):
    parts = spread_partitions("hot", 3, dashboard_backend.settings.partitions.flow)
    said = _run("hot", "--spread", "3", "--reason", "one primary is not enough")
    assert said.strip() == f"lane hot: new executions spread over 3 partition(s): {', '.join(map(str, parts))}"
    assert dashboard_backend.client.hget(keys.lane_config("hot"), "spread") == b"3"
    entry = audit.recent(dashboard_backend, count=1)[0]
    assert (entry.action, entry.target, entry.reason, entry.detail) == (
        "set_lane_spread", "lane:hot", "one primary is not enough", "spread 1 -> 3")
    assert "spread over 3 partition(s)" in _run("hot")


def test_fflane_refuses_a_bad_spread_and_changes_nothing(dashboard_backend):
    with pytest.raises(CommandError, match="spread must be an integer from 1 to 64"):
        _run("hot", "--spread", "0")
    assert not dashboard_backend.client.exists(keys.lane_config("hot"))
