"""The dashboard in a real browser: sign in, open every page, act through the UI, stay inert on hostile input."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from ffcore.execution.client import Client
from tests.browser.conftest import sign_in
from tests.dashboard_fixtures import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def op_page(page: Page, live_server, operator, seed) -> Page:
    sign_in(page, live_server.url, operator.username, PASSWORD)
    return page


def test_an_operator_opens_every_page(op_page: Page, live_server, seed):
    base = live_server.url
    expect(op_page.locator("h1")).to_have_text("Overview")
    expect(op_page.locator("#state-counts")).to_contain_text("default")
    op_page.click("nav >> text=Executions")
    expect(op_page.locator("#executions")).to_contain_text(seed.waiting)
    op_page.click(f"a:text('{seed.completed}')")
    expect(op_page.locator("#public-state")).to_have_text("completed")
    expect(op_page.locator("#why")).to_contain_text("Finished successfully")
    expect(op_page.locator("#attempts")).to_contain_text("ended success")
    op_page.click("nav >> text=Workers")
    expect(op_page.locator("#workers")).to_contain_text(seed.worker.config.worker_instance_id)
    op_page.click("nav >> text=Audit")
    expect(op_page.locator("h1")).to_contain_text("Audit log")
    op_page.goto(base + "/system/")
    expect(op_page.locator("[data-fact=library]")).to_contain_text("contract v6")


def test_cancel_through_the_ui_changes_the_state(op_page: Page, live_server, seed, dashboard_backend):
    op_page.goto(f"{live_server.url}/executions/{seed.waiting}/")
    expect(op_page.locator("#public-state")).to_have_text("waiting")
    form = op_page.locator("#action-cancel")
    form.locator("button").click()  # the browser refuses: a reason is required
    assert Client(dashboard_backend).get_state(seed.waiting) == "waiting"
    form.locator("input[name='cancel-reason']").fill("operator test")
    form.locator("button").click()
    expect(op_page.locator("#action-cancel .outcome")).to_have_text("Cancelled.")
    assert Client(dashboard_backend).get_state(seed.waiting) == "cancelled"
    op_page.reload()
    expect(op_page.locator("#public-state")).to_have_text("cancelled")
    op_page.goto(live_server.url + "/audit/")
    expect(op_page.locator("#audit")).to_contain_text("operator test")


def test_replay_through_the_ui(op_page: Page, live_server, seed, dashboard_backend):
    op_page.goto(f"{live_server.url}/executions/{seed.failed}/")
    expect(op_page.locator("#public-state")).to_have_text("failed")
    op_page.locator("#action-replay input[name='replay-reason']").fill("retry after fix")
    op_page.locator("#action-replay button").click()
    expect(op_page.locator("#action-replay .outcome")).to_contain_text("Replayed")
    op_page.reload()
    expect(op_page.locator("#public-state")).to_have_text("waiting")


def test_take_now_through_the_ui(op_page: Page, live_server, seed, dashboard_backend):
    op_page.goto(f"{live_server.url}/executions/{seed.waiting}/")
    form = op_page.locator("#action-take")
    expect(form.locator("input[name='take-lease_seconds']")).to_have_value("60")
    form.locator("input[name='take-reason']").fill("look at it myself")
    form.locator("input[name='take-lease_seconds']").fill("120")
    form.locator("button").click()
    expect(op_page.locator("#action-take .outcome")).to_contain_text("Taken: leased to operator for 120 s")
    assert Client(dashboard_backend).get_state(seed.waiting) == "active"
    op_page.reload()
    expect(op_page.locator("#public-state")).to_have_text("active")
    expect(op_page.locator("#action-take")).to_have_count(0)  # no longer eligible: not offered


def test_an_engine_refusal_is_shown_in_words(op_page: Page, live_server, seed, dashboard_backend):
    # A finished execution offers no cancel (#25); a form left open while the execution finished is refused.
    op_page.goto(f"{live_server.url}/executions/{seed.waiting}/")
    Client(dashboard_backend).cancel(seed.waiting, reason="behind the page's back")
    op_page.locator("#action-cancel input[name='cancel-reason']").fill("too late")
    op_page.locator("#action-cancel button").click()
    expect(op_page.locator("#action-cancel .outcome")).to_have_text(
        "The execution is not active (it already finished: cancelled).")


def test_script_input_renders_as_inert_text(op_page: Page, live_server, seed):
    dialogs: list[str] = []
    op_page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    op_page.goto(f"{live_server.url}/executions/{seed.xss}/")
    expect(op_page.locator("#input pre.text")).to_have_text("<script>alert(1)</script>")
    assert op_page.locator("#input script").count() == 0
    assert dialogs == []


def test_keyboard_shortcuts(op_page: Page, live_server, seed):
    op_page.goto(live_server.url + "/executions/")
    op_page.keyboard.press("j")
    expect(op_page.locator("#executions tbody tr.selected")).to_have_count(1)
    op_page.keyboard.press("Enter")
    op_page.wait_for_url("**/executions/%7Bfp:**")
    op_page.keyboard.press("/")
    expect(op_page.locator("#jump")).to_be_focused()
    op_page.keyboard.press("Escape")
    op_page.locator("body").click()
    op_page.keyboard.press("?")
    expect(op_page.locator("#help")).to_be_visible()


def test_a_viewer_sees_no_actions(page: Page, live_server, viewer, seed):
    sign_in(page, live_server.url, viewer.username, PASSWORD)
    page.goto(f"{live_server.url}/executions/{seed.waiting}/")
    expect(page.locator("#public-state")).to_have_text("waiting")
    assert page.locator("#action-cancel").count() == 0


def test_readable_on_a_phone(browser, live_server, operator, seed):
    ctx = browser.new_context(viewport={"width": 390, "height": 844})
    p = ctx.new_page()
    sign_in(p, live_server.url, operator.username, PASSWORD)
    p.goto(f"{live_server.url}/executions/{seed.completed}/")
    width = p.evaluate("document.documentElement.scrollWidth")
    assert width <= 400  # no horizontal page scroll; wide tables scroll inside themselves
    ctx.close()


def test_bulk_cancel_from_the_filtered_list(op_page: Page, live_server, seed, dashboard_backend):
    eids = [r.execution_id for r in Client(dashboard_backend).create_many([{"kind": "sweep"} for _ in range(12)])]
    op_page.goto(live_server.url + "/executions/?kind=sweep")
    op_page.click("details.bulk summary")
    op_page.fill("#bulk input[name=reason]", "sweep them")
    op_page.click("#bulk-preview")
    expect(op_page.locator("#bulk [data-count]")).to_have_text("12")
    op_page.click("#bulk-confirm")
    expect(op_page.locator("#bulk .bulk-finished")).to_be_visible()
    expect(op_page.locator("#bulk-results tbody tr")).to_have_count(12)
    assert {Client(dashboard_backend).get_state(e) for e in eids} == {"cancelled"}
