"""Tags in a real browser (#24 item 4): an operator sets a tag on the execution page; a bad one is refused
next to its field and changes nothing."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from ffcore import audit
from ffcore.execution.client import Client
from ffcore.keys import ExecKeys
from ffcore.reads import decode_map
from tests.browser.conftest import sign_in
from tests.dashboard_fixtures import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_operator_sets_a_tag_and_a_refused_one_shows_its_error(page: Page, live_server, operator,
                                                                  dashboard_backend):
    eid = Client(dashboard_backend).create(kind="k", tags={"team": "ml"}).execution_id
    sign_in(page, live_server.url, operator.username, PASSWORD)
    page.goto(f"{live_server.url}/executions/{eid}/")
    form = page.locator("#tag-form")
    expect(page.locator("#tags tr[data-tag='team']")).to_be_visible()

    form.locator("input[name='tag-key']").fill("owner")  # no <caller>. prefix: the browser refuses to send it
    form.locator("input[name='tag-value']").fill("ana")
    form.locator("input[name='tag-reason']").fill("handover")
    form.locator("button").click()
    assert form.locator("input[name='tag-key']").evaluate("el => el.validity.patternMismatch") is True

    form.locator("input[name='tag-key']").fill("ops.owner")
    form.locator("input[name='tag-value']").fill("   ")  # blank once stripped: refused by the server
    form.locator("button").click()
    expect(page.locator("#tag-form [data-error='value']")).to_be_visible()
    assert decode_map(dashboard_backend.client.hgetall(ExecKeys(eid).tags)) == {"team": "ml"}

    page.locator("#tag-form input[name='tag-value']").fill("ana")
    page.locator("#tag-form button").click()
    expect(page.locator("#tag-form .outcome")).to_have_text("Tag ops.owner set.")
    expect(page.locator("#tags tr[data-tag='ops.owner'] td")).to_have_text("ana")
    expect(page.locator("#tags tr[data-tag='team']")).to_be_visible()
    assert decode_map(dashboard_backend.client.hgetall(ExecKeys(eid).tags)) == {"team": "ml", "ops.owner": "ana"}
    e = audit.recent(dashboard_backend, count=1)[0]
    assert (e.action, e.target, e.reason, e.outcome) == ("set_tags", eid, "handover", "ok")
