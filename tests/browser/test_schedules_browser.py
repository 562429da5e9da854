"""The Schedules page in a real browser against daphne (#26): an operator creates a schedule from the page, sees its
next fire times, and its first run appears live (pushed, no reload) once the scanner fires it; the page offers only
the actions the schedule's state allows, and a (red) delete lands on the list with one green message (#36)."""

from __future__ import annotations

import re
import threading

import pytest
from playwright.sync_api import Page, expect

from ffcore.engine.base import run_scanners
from ffcore.engine.schedule_scanner import ScheduleScanner
from ffcore.execution.client import Client
from tests.browser.asgi_server import PASSWORD
from tests.browser.conftest import sign_in

pytestmark = [pytest.mark.browser]


def test_create_a_schedule_see_next_fire_times_and_its_first_run_appear_live(page: Page, asgi_server,
                                                                            backend):
    sign_in(page, asgi_server.url, "otto", PASSWORD)
    page.goto(f"{asgi_server.url}/schedules/")
    expect(page.locator("#schedule-list")).to_contain_text("No schedules yet")
    form = page.locator("#schedule-new")
    form.locator("[name=new-name]").fill("browser-beat")
    form.locator("[name=new-kind]").fill("beat")
    form.locator("[name=new-when]").fill("every 2 s")
    form.locator("[name=new-reason]").fill("try it")
    form.locator("button[type=submit]").click()
    page.wait_for_url(f"{asgi_server.url}/schedules/sch-*/")
    expect(page.locator("#schedule-spec")).to_have_text("Every 2 s")
    expect(page.locator("#upcoming li")).to_have_count(5)
    expect(page.locator("#runs")).to_contain_text("no runs yet")
    expect(page.locator("body")).to_have_attribute("data-live", "on")
    page.evaluate("window.__same_page = true")
    stop = threading.Event()
    scanner = threading.Thread(target=run_scanners, args=([ScheduleScanner(backend, interval_ms=100)], stop),
                               daemon=True)
    scanner.start()
    try:
        run = page.locator("#runs li.run[data-eid]").first
        expect(run).to_be_visible()
        expect(run.locator("a")).to_have_attribute("href", re.compile(r"^/executions/%7Bfp:\d+%7D:[0-9a-f-]{36}/$"))
        expect(page.locator("#history-chart .bar")).not_to_have_count(0)
    finally:
        stop.set()
        scanner.join(timeout=10)
    assert page.evaluate("window.__same_page") is True  # updated in place, no reload


def test_the_actions_follow_the_state_and_a_delete_lands_on_the_list_with_one_green_message(page: Page, asgi_server,
                                                                                           backend):
    s = Client(backend).schedules.create(name="browser-tick", kind="beat", interval_ms=60_000)
    sign_in(page, asgi_server.url, "otto", PASSWORD)
    page.goto(f"{asgi_server.url}/schedules/{s.id}/")
    actions = page.locator("#schedule-action")
    expect(actions.locator("button")).to_have_text(["Pause", "Trigger now"])
    actions.locator("[name=act-reason]").fill("quiet for a while")
    actions.get_by_role("button", name="Pause").click()
    expect(page.locator("#schedule-action [role=status]")).to_have_text("Paused: nothing fires until it is resumed.")
    expect(page.locator("#schedule-action button")).to_have_text(["Resume", "Trigger now"])
    assert Client(backend).schedules.get(s.id).paused

    delete = page.locator("#schedule-delete button.danger")
    normal = page.locator("#schedule-action button").first
    assert delete.evaluate("b => getComputedStyle(b).backgroundColor") != normal.evaluate(
        "b => getComputedStyle(b).backgroundColor")  # the destructive style, not an ordinary button
    page.locator("[name=del-reason]").fill("not needed any more")
    delete.click()
    page.wait_for_url(f"{asgi_server.url}/schedules/")
    expect(page.locator("#schedule-deleted")).to_have_text(re.compile(r"Schedule browser-tick deleted"))
    expect(page.locator("#schedule-deleted")).to_have_class(re.compile(r"\bok\b"))
    expect(page.locator("#schedule-list")).to_contain_text("No schedules yet")
    # A live refresh of the gone schedule racing the delete's redirect is itself sent to the list: nothing red.
    page.wait_for_timeout(1000)
    expect(page.locator(".outcome.bad")).to_have_count(0)
    expect(page.locator("#schedule-deleted")).to_have_count(1)
