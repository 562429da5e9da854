"""The refusals the form sweep (test_form_sweep.py) found missing, one test each, in the words an operator sees."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest

from ffcore import audit
from ffcore.execution.client import Client
from ffcore.keys import ExecKeys
from tests.dashboard.form_routes import World, build_world, other_partition
from tests.keyspace import MISSING_EID, changed, keyspace

pytestmark = pytest.mark.django_db

FORM_TYPE = "application/x-www-form-urlencoded"
HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def world(seed, dashboard_backend) -> World:
    return build_world(dashboard_backend, seed)


def test_raw_bytes_that_are_not_utf8_are_refused_not_taken_as_latin1(operator_client, world, dashboard_backend):
    # Django decodes such a body as Latin-1 ("ÿþ"): the cancel used to go through with that reason.
    r = operator_client.generic("POST", f"/executions/{world.waiting}/cancel", b"cancel-reason=ok\xff\xfe",
                                content_type=FORM_TYPE, **HTMX)
    assert r.status_code == 400 and 'data-error="reason"' in r.content.decode()
    assert "not valid UTF-8" in r.content.decode()
    assert Client(dashboard_backend).get_state(world.waiting) == "waiting"
    assert audit.recent(dashboard_backend) == []


def test_percent_escapes_that_are_not_utf8_are_refused(operator_client, world, dashboard_backend):
    # ...and "%FF" became U+FFFD, equally accepted.
    r = operator_client.generic("POST", f"/waitpoints/{world.suspended}/resume", b"reason=ok%FF",
                                content_type=FORM_TYPE, **HTMX)
    assert r.status_code == 400 and 'data-error="reason"' in r.content.decode()
    assert Client(dashboard_backend).get_state(world.suspended) == "suspended"


def test_a_bulk_action_refuses_a_filter_that_does_not_parse_instead_of_dropping_it(operator_client, world,
                                                                                  dashboard_backend):
    # An unknown state used to be dropped, so the preview (and the run) covered every execution on the lane.
    url = "/executions/bulk/preview?" + urlencode({"lane": "default", "state": "exploded"})
    r = operator_client.post(url, {"action": "cancel", "reason": "cleanup"}, **HTMX)
    html = r.content.decode()
    assert r.status_code == 400 and 'data-error="state"' in html and "Unknown state" in html
    assert "data-count" not in html
    url = "/executions/bulk/run?" + urlencode({"lane": "default", "state": "exploded"})
    before = keyspace(dashboard_backend)
    r = operator_client.post(url, {"action": "cancel", "reason": "cleanup", "confirm_count": "4"}, **HTMX)
    assert r.status_code == 400 and 'data-error="state"' in r.content.decode()
    assert changed(before, keyspace(dashboard_backend)) == []


def test_a_bad_confirm_count_is_shown(operator_client, world):
    r = operator_client.post("/executions/bulk/run?lane=default", {"action": "cancel", "reason": "x",
                                                                   "confirm_count": "NaN"}, **HTMX)
    assert r.status_code == 400
    assert 'data-error="confirm_count"' in r.content.decode() and "preview again" in r.content.decode()


@pytest.mark.parametrize(("payload", "says"), [('{"a": NaN}', "NaN is not a JSON number"),
                                               ("[-Infinity]", "-Infinity is not a JSON number"),
                                               ('{"a": 1e309}', "1e309 is out of range"),
                                               ('"\\ud800"', "unpaired surrogate"),
                                               ("[" * 30_000 + "]" * 30_000, "nested too deeply")])
def test_a_signal_payload_that_is_not_portable_json_is_a_form_error(operator_client, world, dashboard_backend,
                                                                    payload, says):
    # NaN / Infinity / 1e309 used to be stored as NaN / Infinity (not JSON); a lone surrogate was a 500.
    r = operator_client.post(f"/waitpoints/{world.suspended}/{world.suspended_wid}/signal",
                             {"name": "legal", "reason": "x", "payload": payload}, **HTMX)
    assert r.status_code == 400 and 'data-error="payload"' in r.content.decode()
    assert says in r.content.decode()
    assert dashboard_backend.client.zcard(ExecKeys(world.suspended).signals) == 0


@pytest.mark.parametrize("target", ["missing", "other-partition"])
def test_an_execution_id_that_names_nothing_is_404_and_not_audited(operator_client, world, dashboard_backend,
                                                                   target):
    # It used to answer 409 and append a "refused: execution_not_found" entry to the audit stream.
    eid = MISSING_EID if target == "missing" else other_partition(world.waiting)
    before = keyspace(dashboard_backend)
    r = operator_client.post(f"/executions/{eid}/cancel", {"cancel-reason": "x"}, **HTMX)
    assert r.status_code == 404 and "No execution has this id." in r.content.decode()
    assert changed(before, keyspace(dashboard_backend)) == []


def test_a_flow_or_budget_that_does_not_exist_is_404_and_not_audited(operator_client, world, dashboard_backend):
    before = keyspace(dashboard_backend)
    r = operator_client.post(f"/flows/{world.budget_id}/cancel", {"cancel-reason": "x"}, **HTMX)
    assert r.status_code == 404 and "No flow has this id." in r.content.decode()
    r = operator_client.post(f"/budgets/{world.quota_id}/reset", {"reset-reason": "x"}, **HTMX)
    assert r.status_code == 404 and "No budget has this id." in r.content.decode()
    assert changed(before, keyspace(dashboard_backend)) == []


def test_a_404_names_what_was_not_found_and_is_a_fragment_for_htmx(operator_client, world):
    # It used to be Django's bare "The requested resource was not found", a whole page swapped into the form.
    r = operator_client.post("/executions/not-an-id/cancel", {"cancel-reason": "x"}, **HTMX)
    html = r.content.decode()
    assert r.status_code == 404 and "is not an execution id" in html and "Nothing was changed." in html
    assert "<html" not in html
    page = operator_client.get("/executions/not-an-id/").content.decode()
    assert "<html" in page and "is not an execution id" in page and "Nothing was changed." not in page


def test_a_body_past_the_upload_cap_says_it_could_not_be_read(operator_client, world, dashboard_backend):
    r = operator_client.post(f"/executions/{world.waiting}/cancel",
                             urlencode({"cancel-reason": "x" * (3 * 1024 * 1024)}), content_type=FORM_TYPE)
    assert r.status_code == 400 and "could not be read" in r.content.decode()
    assert Client(dashboard_backend).get_state(world.waiting) == "waiting"


def test_a_refused_sign_in_is_a_400_with_the_error_shown(client, operator):
    r = client.post("/login/", {"username": operator.username, "password": "wrong"})
    assert r.status_code == 400 and 'data-error="__all__"' in r.content.decode()
    r = client.post("/login/", {"password": "wrong"})
    assert r.status_code == 400 and 'data-error="username"' in r.content.decode()
