"""The waitpoints inbox in a real browser: an operator signals a suspended execution and sees it resume."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from ffcore.execution.client import Client
from ffcore.suspension import hmac_secrets
from tests.browser.conftest import sign_in
from tests.dashboard_fixtures import PASSWORD
from tests.ffcore.suspension_support import SECRET, claim_again, claimed

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_operator_signals_a_suspended_execution_from_the_inbox_and_it_resumes(page: Page, live_server, operator,
                                                                                 dashboard_backend):
    hmac_secrets.install(dashboard_backend, SECRET)
    t = claimed(dashboard_backend, kind="approve")
    out = t.suspend("approved", timeout_ms=600_000, reason_code="waiting_for_approval")
    eid = t.execution_id

    sign_in(page, live_server.url, operator.username, PASSWORD)
    page.goto(live_server.url + "/waitpoints/")  # (the nav link is added by the lead in base.html)
    row = page.locator(f"#wp-{out.waitpoint_id}")
    expect(row).to_contain_text(eid)
    expect(row).to_contain_text("approved")
    assert out.token.split(":")[1] not in page.content()

    row.locator("summary", has_text="Signal").click()
    form = row.locator(f"#wp-signal-{out.waitpoint_id}")
    form.locator("input[name=name]").fill("approved")
    form.locator("textarea[name=payload]").fill("{not json")
    form.locator("input[name=reason]").fill("approved on the phone")
    form.locator("button").click()
    expect(row.locator("[data-error=payload]")).to_contain_text("not valid JSON")
    assert Client(dashboard_backend).get_state(eid) == "suspended"

    row.locator("textarea[name=payload]").fill('{"approved": true}')
    row.locator(f"#wp-signal-{out.waitpoint_id} button").click()
    expect(row.locator(".outcome")).to_contain_text("resume condition is satisfied")
    assert Client(dashboard_backend).get_state(eid) == "waiting"

    row.locator("a.mono", has_text=eid).click()
    expect(page.locator("#public-state")).to_have_text("waiting")
    expect(page.locator("#suspension")).to_contain_text("Last suspension")
    expect(page.locator("#suspension-signals")).to_contain_text("approved")
    [sig] = claim_again(dashboard_backend, eid).resume_signals()
    assert (sig.json(), sig.source_identity) == ({"approved": True}, operator.username)
