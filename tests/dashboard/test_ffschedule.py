"""`manage.py ffschedule add|list|pause|resume|trigger|delete` (#26): the same ffcore operations as the API and the
page, audited as cli:<user> with the required reason; bad input is refused naming the field, writing nothing."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from ffcore import audit
from ffcore.execution.client import Client
from tests.keyspace import keyspace


def _run(*args: str) -> str:
    out = io.StringIO()
    call_command("ffschedule", *args, stdout=out)
    return out.getvalue()


def test_ffschedule_adds_lists_pauses_resumes_triggers_and_deletes(dashboard_backend):
    said = _run("add", "tick", "--every", "10", "--kind", "heartbeat", "--reason", "demo")
    client = Client(dashboard_backend)
    s = client.schedules.by_name("tick")
    assert s is not None and said.startswith(f"{s.id}  tick: Every 10 s; next ")
    assert "[active]  Every 10 s  kind=heartbeat" in _run("list")
    assert "paused" in _run("pause", "tick", "--reason", "quiet") and client.schedules.get(s.id).paused
    assert "active" in _run("resume", s.id, "--reason", "loud") and not client.schedules.get(s.id).paused
    eid = _run("trigger", "tick", "--reason", "now").split("execution ")[1].strip()
    assert client.get_state(eid) == "waiting"
    _run("delete", "tick", "--reason", "done")
    assert client.schedules.get(s.id) is None and _run("list").strip() == "no schedules"
    actions = [(e.action, e.reason, e.actor.startswith("cli:")) for e in audit.recent(dashboard_backend, count=5)]
    assert actions == [("schedule_delete", "done", True), ("schedule_trigger", "now", True),
                       ("schedule_resume", "loud", True), ("schedule_pause", "quiet", True),
                       ("schedule_add", "demo", True)]


@pytest.mark.parametrize(("args", "message"), [
    (("add", "x", "--cron", "0 25 * * *", "--kind", "k", "--reason", "r"), "invalid spec.cron"),
    (("add", "x", "--cron", "0 1 * * *", "--tz", "Atlantis/City", "--kind", "k", "--reason", "r"),
     "invalid spec.timezone"),
    (("add", "x", "--every", "0.5", "--kind", "k", "--reason", "r"), "invalid spec.interval_ms"),
    (("add", "x", "--every", "5", "--kind", "k"), "needs --reason"),
    (("pause", "nothing-here", "--reason", "r"), "no schedule 'nothing-here'"),
])
def test_ffschedule_refuses_bad_input_naming_the_field_and_writes_nothing(dashboard_backend, args, message):
    before = {k: v for k, v in keyspace(dashboard_backend).items() if k != b"ff:audit"}
    with pytest.raises(CommandError, match=message):
        _run(*args)
    assert {k: v for k, v in keyspace(dashboard_backend).items() if k != b"ff:audit"} == before
