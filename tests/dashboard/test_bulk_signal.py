"""Bulk signal from the waitpoints inbox (#25 item 9): ticked rows or the whole filter, preview and count,
confirm, a bulk job with per-item results and one audit row; refusals never half-apply."""

from __future__ import annotations

import re
import time

import pytest

from ffcore import audit
from ffcore.execution import bulk
from ffcore.execution.client import Client
from ffcore.suspension import hmac_secrets
from ffcore.suspension.signals import RESUMED
from tests.ffcore.suspension_support import SECRET, claimed

pytestmark = pytest.mark.django_db


@pytest.fixture
def waiting(dashboard_backend):
    """Three executions suspended on "approved" (lane a) and one on "other" (lane b): (eid, wid) each."""
    hmac_secrets.install(dashboard_backend, SECRET)
    out = []
    for name, lane in (("approved", "a"), ("approved", "a"), ("approved", "a"), ("other", "b")):
        t = claimed(dashboard_backend, kind="approve", lane=lane)
        out.append((t.execution_id, t.suspend([name], timeout_ms=600_000).waitpoint_id))
    return out


def _wait_job(backend, job):
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        st = bulk.status(backend, job)
        if st and st.finished:
            return st
        time.sleep(0.05)
    raise AssertionError("bulk job did not finish")


def _post(client, path, qs="", **data):
    body = {"name": "approved", "payload": '{"ok": true}', "reason": "batch approval", **data}
    return client.post(f"/waitpoints/bulk/{path}?{qs}", body, HTTP_HX_REQUEST="true")


def test_the_inbox_offers_row_checkboxes_and_prefills_signal_names(operator_client, waiting):
    html = operator_client.get("/waitpoints/?signal=approved").content.decode()
    assert html.count('form="bulk-signal-form"') == 3
    assert 'value="approved" placeholder="e.g. approved"' in html  # the bulk form's name from the filter
    # Each row's own signal form offers the name its waitpoint expects.
    eid, wid = waiting[3]
    other = operator_client.get("/waitpoints/").content.decode()
    row = re.search(rf'<tr id="wp-{wid}".*?</tr>', other, re.S).group(0)
    assert '<input name="name" value="other"' in row


def test_a_filter_preview_counts_without_delivering_and_the_confirm_signals_them_all(operator_client, waiting,
                                                                                     dashboard_backend):
    r = _post(operator_client, "preview", "lane=a", mode="filter")
    html = r.content.decode()
    assert r.status_code == 200 and 'data-count="3"' in html and "data-expecting" not in html
    c = Client(dashboard_backend)
    assert {c.get_state(e) for e, _ in waiting} == {"suspended"}  # a preview changes nothing
    r = _post(operator_client, "run", "lane=a", mode="filter", confirm_count="3")
    job = re.search(r"/executions/bulk/([0-9a-f-]{36})/", r.content.decode()).group(1)
    st = _wait_job(dashboard_backend, job)
    assert (st.total, st.fields["ok"], st.fields["failed"], st.fields["action"]) == (3, "3", "0", "signal")
    assert {c.get_state(e) for e, _ in waiting[:3]} == {"waiting"} and c.get_state(waiting[3][0]) == "suspended"
    assert all(r["ok"] for r in st.results) and {r["code"] for r in st.results} == {RESUMED}
    rows = audit.page(dashboard_backend, audit.AuditFilter()).rows
    assert len(rows) == 1 and rows[0].job == job and rows[0].count == 3 and rows[0].action == "bulk_signal"


def test_ticked_rows_only_are_signalled(operator_client, waiting, dashboard_backend):
    sel = [f"{e} {w}" for e, w in waiting[:2]]
    r = _post(operator_client, "preview", mode="selected", sel=sel)
    assert r.status_code == 200 and 'data-count="2"' in r.content.decode()
    r = _post(operator_client, "run", mode="selected", sel=sel, confirm_count="2")
    job = re.search(r"/executions/bulk/([0-9a-f-]{36})/", r.content.decode()).group(1)
    _wait_job(dashboard_backend, job)
    c = Client(dashboard_backend)
    assert [c.get_state(e) for e, _ in waiting] == ["waiting", "waiting", "suspended", "suspended"]


def test_a_changed_set_asks_again_and_signals_nothing(operator_client, waiting, dashboard_backend):
    r = _post(operator_client, "run", "lane=a", mode="filter", confirm_count="2")
    assert r.status_code == 409 and "The set changed since the preview" in r.content.decode()
    assert {Client(dashboard_backend).get_state(e) for e, _ in waiting} == {"suspended"}
    assert audit.recent(dashboard_backend) == []


def test_the_preview_says_how_many_expect_the_name(operator_client, waiting):
    html = _post(operator_client, "preview", "", mode="filter").content.decode()
    assert 'data-count="4"' in html and 'data-expecting="3"' in html


BAD = [({"mode": "selected"}, "sel"), ({"mode": "selected", "sel": ["nope x"]}, "sel"),
       ({"mode": "filter", "payload": "{bad"}, "payload"), ({"mode": "filter", "name": ""}, "name"),
       ({"mode": "filter", "reason": ""}, "reason"), ({"mode": "sideways"}, "mode")]


def test_bad_input_is_a_field_error_and_nothing_is_signalled(operator_client, waiting, dashboard_backend):
    for data, field in BAD:
        for path in ("preview", "run"):
            r = _post(operator_client, path, **{"confirm_count": "3", **data})
            assert r.status_code == 400 and f'data-error="{field}"' in r.content.decode(), (data, path)
    assert {Client(dashboard_backend).get_state(e) for e, _ in waiting} == {"suspended"}
    assert audit.recent(dashboard_backend) == []


def test_viewers_may_not_bulk_signal(viewer_client, waiting, dashboard_backend):
    r = _post(viewer_client, "preview", mode="filter")
    assert r.status_code == 403
    assert 'form="bulk-signal-form"' not in viewer_client.get("/waitpoints/").content.decode()
