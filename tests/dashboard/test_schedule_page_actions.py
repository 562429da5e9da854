"""The schedule page's actions follow the state (#36 Why-4): an active schedule offers pause and trigger, a paused
one resume and trigger; a stale form's no-op is refused in words and not audited; delete is a red destructive form
that returns to the list with one green message (no red "gone" beside it, no refresh of the gone schedule); the
create form takes "every 5 minutes" and reports every bad field at once."""

from __future__ import annotations

import pytest
from django.urls import reverse

from ffcore import audit
from ffcore.execution.client import Client
from tests.dashboard.schedule_forms import post
from tests.keyspace import changed, keyspace

pytestmark = pytest.mark.django_db

NEW = {"name": "beat", "kind": "beat", "lane": "default", "when": "every 5 minutes", "timezone": "UTC",
       "priority": "0", "overlap": "allow", "catchup": "1", "payload": "", "reason": "try"}



def offered(html: str) -> str:
    return html.split('data-offered="')[1].split('"')[0]


@pytest.fixture
def active(dashboard_backend):
    return Client(dashboard_backend).schedules.create(name="tick", kind="beat", interval_ms=60_000)


def test_the_page_offers_only_the_actions_the_state_allows(operator_client, dashboard_backend, active):
    html = operator_client.get(reverse("schedule", args=[active.id])).content.decode()
    assert offered(html) == "pause trigger" and 'value="resume"' not in html
    Client(dashboard_backend).schedules.pause(active.id)
    html = operator_client.get(reverse("schedule", args=[active.id])).content.decode()
    assert offered(html) == "resume trigger" and 'value="pause"' not in html


def test_delete_is_a_separate_red_destructive_form(operator_client, active):
    html = operator_client.get(reverse("schedule", args=[active.id])).content.decode()
    form = html.split('id="schedule-delete"')[1].split("</form>")[0]
    assert 'class="danger">Delete schedule</button>' in form and 'name="del-action" value="remove"' in form
    assert 'class="action destructive" id="schedule-delete"' in html


def test_resume_from_a_stale_page_is_refused_in_words_and_not_audited(operator_client, dashboard_backend, active):
    before = keyspace(dashboard_backend)
    r = post(operator_client, reverse("schedule_act", args=[active.id]), {"action": "resume", "reason": "go"}, "act",
             htmx=True)
    assert r.status_code == 409
    assert "already active; nothing changed" in r.content.decode() and "Resumed." not in r.content.decode()
    assert changed(before, keyspace(dashboard_backend)) == []  # not even an audit entry
    assert audit.recent(dashboard_backend, count=5) == []


def test_a_delete_goes_back_to_the_list_with_one_green_message(operator_client, dashboard_backend, active):
    r = post(operator_client, reverse("schedule_act", args=[active.id]), {"action": "remove", "reason": "done"},
             "del", htmx=True)
    assert r.status_code == 200 and r["HX-Redirect"] == reverse("schedules")
    assert Client(dashboard_backend).schedules.get(active.id) is None
    html = operator_client.get(reverse("schedules")).content.decode()
    assert 'class="outcome ok" role="status" id="schedule-deleted">Schedule tick deleted' in html
    assert "No schedule has this id" not in html and 'class="outcome bad"' not in html
    assert "Schedule tick deleted" not in operator_client.get(reverse("schedules")).content.decode()  # once


def test_the_deleting_tab_sent_to_the_list_twice_shows_only_the_green_message(operator_client, active):
    # The delete's push can make the old page's live refresh answer "gone" too; the list says it once.
    post(operator_client, reverse("schedule_act", args=[active.id]), {"action": "remove", "reason": "done"}, "del",
         htmx=True)
    html = operator_client.get(reverse("schedules") + f"?gone={active.id}").content.decode()
    assert "Schedule tick deleted" in html and "no longer exists" not in html


def test_a_delete_without_a_reason_stays_on_the_page_with_the_error(operator_client, dashboard_backend, active):
    r = post(operator_client, reverse("schedule_act", args=[active.id]), {"action": "remove", "reason": ""}, "del",
             htmx=True)
    assert r.status_code == 400 and 'id="schedule-delete"' in r.content.decode()
    assert 'data-error="reason"' in r.content.decode() and Client(dashboard_backend).schedules.get(active.id)


def test_a_delete_without_htmx_redirects_to_the_list(operator_client, active):
    r = post(operator_client, reverse("schedule_act", args=[active.id]), {"action": "remove", "reason": "done"}, "del")
    assert r.status_code == 302 and r["Location"] == reverse("schedules")


def test_the_live_refresh_of_a_deleted_schedule_goes_to_the_list_instead_of_a_red_404(operator_client,
                                                                                     dashboard_backend, active):
    Client(dashboard_backend).schedules.delete(active.id)
    r = operator_client.get(reverse("schedule", args=[active.id]), HTTP_HX_REQUEST="true")
    assert r.status_code == 404 and r.content == b""
    assert r["HX-Redirect"] == reverse("schedules") + f"?gone={active.id}"
    html = operator_client.get(r["HX-Redirect"]).content.decode()
    assert f'<span class="mono">{active.id}</span> no longer exists' in html and 'class="outcome bad"' not in html


def test_the_create_form_takes_every_5_minutes(operator_client, dashboard_backend):
    r = post(operator_client, reverse("schedule_create"), NEW, "new", htmx=True)
    assert r.status_code == 200, r.content[:300]
    assert Client(dashboard_backend).schedules.by_name("beat").spec.interval_ms == 300_000
    html = operator_client.get(r["HX-Redirect"]).content.decode()
    assert 'value="every 5 min"' in html  # the edit form shows it in words it reads back


def test_the_create_form_reports_every_bad_field_at_once(operator_client, dashboard_backend):
    before = keyspace(dashboard_backend)
    bad = {**NEW, "when": "every 5 fortnights", "timezone": "Moon/Base", "kind": "", "priority": "x",
           "catchup": "²", "overlap": "never"}
    r = post(operator_client, reverse("schedule_create"), bad, "new", htmx=True)
    html = r.content.decode()
    assert r.status_code == 400
    for field in ("when", "timezone", "kind", "priority", "catchup", "overlap"):
        assert f'data-error="{field}"' in html, field
    assert 'e.g. &quot;every 5 minutes&quot;' in html  # says what is accepted
    assert changed(before, keyspace(dashboard_backend)) == []
