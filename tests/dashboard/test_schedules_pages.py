"""The Schedules pages (#26): the list shows the spec in words, the next 5 fire times and the last runs with their
outcome and links; the detail shows the history chart; operators create, edit, pause/resume, trigger and delete with a
required reason (audited); refusals are a form error next to the field with nothing written."""

from __future__ import annotations

import pytest
from django.urls import reverse

from ffcore import audit
from ffcore.engine.schedule_scanner import ScheduleScanner
from ffcore.execution.client import Client
from tests.dashboard.schedule_forms import post
from tests.keyspace import changed, keyspace

pytestmark = pytest.mark.django_db

NEW = {"name": "paris-report", "kind": "report", "lane": "default", "when": "0 9 * * 1", "timezone": "Europe/Paris",
       "priority": "0", "overlap": "skip", "catchup": "skip", "payload": "", "reason": "weekly"}



@pytest.fixture
def fired(dashboard_backend):
    """A 1 s schedule that fired once (its run still waiting) and a paused cron one."""
    client = Client(dashboard_backend)
    s = client.schedules.create(name="tick", kind="heartbeat", interval_ms=1000)
    assert ScheduleScanner(dashboard_backend).tick(now_ms=s.next_fire_at) == 1
    client.schedules.create(name="weekly", kind="report", cron="0 9 * * 1", timezone="Europe/Paris", paused=True)
    return client.schedules.get(s.id)


def test_a_viewer_sees_words_next_fire_times_last_runs_and_the_history_but_cannot_post(viewer_client, fired,
                                                                                       dashboard_backend):
    html = viewer_client.get(reverse("schedules")).content.decode()
    assert "At 09:00, only on Monday, Europe/Paris" in html and "Every 1 s" in html
    row = html.split(f'data-schedule="{fired.id}"')[1].split("</tr>")[0]
    assert row.count("<li>") == 5  # the next five fire times
    assert f'href="{reverse("execution", args=[fired.last_eid])}"' in row and "s-waiting" in row
    assert 'data-paused="1"' in html and "New schedule" not in html  # a viewer gets no form
    assert 'href="/schedules/"' in html  # the nav link
    html = viewer_client.get(reverse("schedule", args=[fired.id])).content.decode()
    assert html.count('class="bar b-running"') == 2  # the one fire, plus its legend swatch
    assert 'id="schedule-live" data-live="' + fired.id in html
    partial = viewer_client.get(reverse("schedule", args=[fired.id]), HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in partial and 'id="runs"' in partial
    assert viewer_client.get(reverse("schedule", args=["sch-1-0123456789abcdef"])).status_code == 404
    assert viewer_client.get(reverse("schedule", args=["nonsense"])).status_code == 404
    before = keyspace(dashboard_backend)
    r = post(viewer_client, reverse("schedule_act", args=[fired.id]), {"action": "trigger", "reason": "x"}, "act")
    assert r.status_code == 403 and changed(before, keyspace(dashboard_backend)) == []


def test_an_operator_creates_a_schedule_from_the_page(operator_client, dashboard_backend):
    r = post(operator_client, reverse("schedule_create"), NEW, "new", htmx=True)
    assert r.status_code == 200, r.content[:500]
    s = Client(dashboard_backend).schedules.by_name("paris-report")
    assert s is not None and s.overlap == "skip" and s.catchup == 0
    assert r["HX-Redirect"] == reverse("schedule", args=[s.id])
    entry = audit.recent(dashboard_backend, count=1)[0]
    assert (entry.action, entry.reason, entry.outcome) == ("schedule_create", "weekly", "ok")
    r = post(operator_client, reverse("schedule_create"), {**NEW, "name": "every-10", "when": "every 10 s"}, "new")
    assert r.status_code == 302
    assert Client(dashboard_backend).schedules.by_name("every-10").spec.interval_ms == 10_000


REFUSALS = [
    ({"when": "61 * * * *"}, "when"), ({"when": "every 0 s"}, "when"), ({"timezone": "Moon/Base"}, "timezone"),
    ({"kind": ""}, "kind"), ({"lane": "a b"}, "lane"), ({"overlap": "never"}, "overlap"),
    ({"catchup": "-2"}, "catchup"), ({"reason": ""}, "reason"), ({"name": "tick"}, "name"),
]


def test_refusals_are_shown_next_to_the_field_and_write_nothing(operator_client, dashboard_backend, fired):
    for change, field in REFUSALS:
        before = keyspace(dashboard_backend)
        r = post(operator_client, reverse("schedule_create"), {**NEW, **change}, "new", htmx=True)
        assert r.status_code == 400 and f'data-error="{field}"' in r.content.decode(), change
        assert changed(before, keyspace(dashboard_backend)) == [], change


def test_operator_forms_pause_resume_trigger_edit_and_delete_with_a_reason(operator_client, dashboard_backend, fired):
    url = reverse("schedule_act", args=[fired.id])
    r = post(operator_client, url, {"action": "pause", "reason": ""}, "act", htmx=True)
    assert r.status_code == 400 and 'data-error="reason"' in r.content.decode()
    client = Client(dashboard_backend)
    assert post(operator_client, url, {"action": "pause", "reason": "quiet"}, "act", htmx=True).status_code == 200
    assert client.schedules.get(fired.id).paused
    assert post(operator_client, url, {"action": "resume", "reason": "go"}, "act", htmx=True).status_code == 200
    r = post(operator_client, url, {"action": "trigger", "reason": "now"}, "act", htmx=True)
    assert r.status_code == 200 and "Fired now" in r.content.decode()
    assert [x.outcome for x in client.schedules.runs(fired.id)][:1] == ["triggered"]
    edit = reverse("schedule_edit", args=[fired.id])
    data = {**NEW, "name": "tick", "kind": "heartbeat2", "when": "every 5 s", "timezone": "UTC", "reason": "slower"}
    r = post(operator_client, edit, data, "edit", htmx=True)
    assert r.status_code == 200, r.content[:300]
    s = client.schedules.get(fired.id)
    assert s.spec.interval_ms == 5000 and s.template.kind == "heartbeat2"
    r = post(operator_client, edit, {**data, "lane": "elsewhere"}, "edit", htmx=True)
    assert r.status_code == 400 and 'data-error="lane"' in r.content.decode()
    r = post(operator_client, url, {"action": "remove", "reason": "done"}, "act", htmx=True)
    assert r.status_code == 200 and r["HX-Redirect"] == reverse("schedules")  # back to the list
    assert client.schedules.get(fired.id) is None
    actions = [e.action for e in audit.recent(dashboard_backend, count=5)]
    assert actions == ["schedule_delete", "schedule_update", "schedule_trigger", "schedule_resume", "schedule_pause"]
    gone = post(operator_client, url, {"action": "pause", "reason": "x"}, "act")
    assert gone.status_code == 404 and 'class="outcome bad"' in gone.content.decode()


def test_the_demo_adds_its_two_schedules_once(dashboard_backend):
    from dashboard.demo import schedules as demo

    demo.setup(dashboard_backend)
    demo.setup(dashboard_backend)  # a restart of `up --demo` keeps them
    rows = {s.name: s for s in Client(dashboard_backend).schedules.list()}
    assert sorted(rows) == ["inbox-sweep", "incident-summary"]
    assert rows["inbox-sweep"].description == "Every 10 s"
    assert rows["incident-summary"].description == "Every 2 minutes, Europe/Paris"
