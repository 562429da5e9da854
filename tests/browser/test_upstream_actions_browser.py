"""Operator actions on an upstream FlowFabric v0.15.0 deployment, clicked through the real pages in Chromium
(issue #40 item 5): a daphne of its own on a Valkey holding upstream's released library and a scenario written
through upstream's functions. After each action the page shows the new state and upstream's own records say so;
a feature only our library has is refused in words next to its form; the library stays byte-for-byte as it was."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from ffcore import keys
from ffcore.embedded import EmbeddedValkey
from ffcore.keys import ExecKeys, FlowKeys
from ffcore.settings import Settings
from tests import upstream_scenario
from tests.browser.asgi_server import PASSWORD, AsgiServer
from tests.browser.conftest import sign_in
from tests.upstream_scenario import *  # noqa: F403 - the deployment's fixtures

pytestmark = [pytest.mark.browser]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, upstream_server: EmbeddedValkey,
         upstream_settings: Settings) -> Iterator[tuple[AsgiServer, upstream_scenario.Made, Any]]:
    tmp = tmp_path_factory.mktemp("upstream-actions-asgi")
    with upstream_scenario.served(tmp, upstream_server, upstream_settings) as got:
        yield got


def _until(check: Callable[[], bool], what: str, seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def _core(raw: Any, eid: str) -> dict[str, str]:
    return {a.decode(): b.decode() for a, b in raw.hgetall(ExecKeys(eid).core).items()}


def _act(page: Page, name: str, reason: str, **fields: str) -> None:
    form = page.locator(f"#action-{name}")
    for field, value in fields.items():
        form.locator(f"input[name='{name}-{field}']").fill(value)
    form.locator(f"input[name='{name}-reason']").fill(reason)
    form.locator("button").click()


def test_an_operator_cancels_replays_reprioritises_signals_and_cancels_a_flow_through_upstreams_library(
        page: Page, site):
    asgi, m, raw = site
    base = asgi.url
    digest, dump = upstream_scenario.code_digest(raw), raw.function_dump()
    sign_in(page, base, "otto", PASSWORD)
    victim, other = m.solo[0], m.solo[1]

    # Cancel from the execution's page.
    page.goto(f"{base}/executions/{victim}/")
    expect(page.locator("#public-state")).to_have_text("waiting")
    _act(page, "cancel", "duplicate order")
    expect(page.locator("#action-cancel .outcome")).to_have_text("Cancelled.")
    assert _core(raw, victim)["terminal_outcome"] == "cancelled"
    page.reload()
    expect(page.locator("#public-state")).to_have_text("cancelled")

    # Replay the cancelled one.
    _act(page, "replay", "customer asked again")
    expect(page.locator("#action-replay .outcome")).to_contain_text("Replayed")
    core = _core(raw, victim)
    assert (core["public_state"], core["replay_count"]) == ("waiting", "1")
    page.reload()
    expect(page.locator("#public-state")).to_have_text("waiting")

    # Change a priority.
    page.goto(f"{base}/executions/{other}/")
    _act(page, "priority", "vip customer", priority="7")
    expect(page.locator("#action-priority .outcome")).to_have_class("outcome ok")
    assert _core(raw, other)["priority"] == "7"

    # Signal the composite waitpoint: one leaf from the inbox, the other from the execution's page.
    page.goto(f"{base}/waitpoints/")
    row = page.locator(f"#wp-{m.waitpoint_id}")
    row.locator("summary", has_text="Signal…").click()
    form = row.locator(f"#wp-signal-{m.waitpoint_id}")
    form.locator("input[name=name]").fill("approve")
    form.locator("input[name=reason]").fill("manager said yes")
    form.locator("button").click()
    expect(row.locator(f"#wp-signal-{m.waitpoint_id} .outcome")).to_have_class("outcome ok")
    assert raw.scard(ExecKeys(m.suspended).suspension_satisfied_set) == 1  # one leaf of the AllOf
    assert _core(raw, m.suspended)["public_state"] == "suspended"
    page.goto(f"{base}/executions/{m.suspended}/")
    expect(page.locator("body")).to_contain_text("received ✓")
    form = page.locator(f"#suspension-actions #wp-signal-{m.waitpoint_id}")
    form.locator("input[name=name]").fill("legal")
    form.locator("input[name=reason]").fill("legal signed off")
    form.locator("button").click()
    expect(page.locator(f"#suspension-actions #wp-signal-{m.waitpoint_id} .outcome")).to_have_class("outcome ok")
    assert _core(raw, m.suspended)["public_state"] == "waiting"
    assert raw.xlen(ExecKeys(m.suspended).idx.signal_delivery) == 2  # upstream's delivery stream has both
    page.reload()
    expect(page.locator("#public-state")).to_have_text("waiting")

    # Cancel the flow from its page: the flow and every member, through upstream's functions.
    page.goto(f"{base}/flows/{m.flow_id}/")
    page.locator("#flow-cancel input[name$='-reason']").fill("pipeline abandoned")
    page.locator("#flow-cancel button").click()
    expect(page.locator("#flow-cancel .outcome")).to_have_class("outcome ok")
    n = m.flow_partition
    _until(lambda: all(_core(raw, e).get("terminal_outcome") == "cancelled" for e in m.members.values()),
           "every member cancelled")
    _until(lambda: raw.scard(keys.flow_pending_cancels(n, m.flow_id)) == 0, "upstream's pending set drained")
    assert raw.hget(FlowKeys(n, m.flow_id).core, "public_flow_state") == b"cancelled"
    page.reload()
    expect(page.locator("#flow-state")).to_have_text("cancelled")

    # A feature only our library has: the schedule form says so next to itself, and nothing is written.
    page.goto(f"{base}/schedules/")
    before = set(raw.keys("*"))
    new = page.locator("#schedule-new")
    for field, value in {"name": "nightly", "kind": "report", "when": "0 9 * * 1", "reason": "weekly"}.items():
        new.locator(f"[name='new-{field}']").fill(value)
    new.locator("button").click()
    expect(page.locator("#schedule-new .outcome")).to_contain_text(
        "is not available on upstream FlowFabric v0.14-v0.15")
    assert not {k for k in set(raw.keys("*")) - before if not k.startswith((b"ff:audit", b"ff:events"))}

    page.goto(f"{base}/audit/")
    for reason in ("duplicate order", "customer asked again", "vip customer", "manager said yes",
                   "legal signed off", "pipeline abandoned"):
        expect(page.locator("#audit")).to_contain_text(reason)
    assert upstream_scenario.code_digest(raw) == digest and raw.function_dump() == dump
