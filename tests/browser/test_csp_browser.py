"""The Content-Security-Policy in Chromium: an operator walks every page of the dashboard (daphne, so the live
sockets run too) and not one script, style, socket or request is blocked; the API docs work offline.

A `securitypolicyviolation` listener is installed before any page script runs, the console is watched for
Chromium's "Content Security Policy" messages, and every request to a host other than this machine is
aborted and recorded.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Page, Route, expect

from ffcore.budgets.budgets import create_budget, report_usage
from ffcore.budgets.quotas import create_quota_policy
from ffcore.execution.client import Client
from ffcore.flows.dag import resolve_outgoing
from ffcore.flows.flows import Flows
from ffcore.suspension import hmac_secrets
from ffcore.worker.worker import Worker, WorkerConfig
from tests.browser.asgi_server import PASSWORD
from tests.browser.conftest import sign_in
from tests.ffcore.suspension_support import SECRET

pytestmark = [pytest.mark.browser]

LISTEN = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (e) => window.__cspViolations.push(
  [e.violatedDirective, e.blockedURI, e.sourceFile + ":" + e.lineNumber, e.sample].join(" ")));
"""


@dataclass
class Watch:
    """What the guarded page saw: violations, CSP console messages, script errors, outside requests and the
    Content-Security-Policy header of every document and htmx/fetch response."""

    violations: list[str] = field(default_factory=list)
    console: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    outside: list[str] = field(default_factory=list)
    headers: dict[str, str | None] = field(default_factory=dict)
    #: Every console error and every 4xx/5xx response (#25: no console errors on any page, favicon included).
    console_errors: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)

    def collect(self, page: Page) -> None:
        """Take the current document's violations (call before leaving it)."""
        self.violations += [f"{page.url}: {v}" for v in page.evaluate("window.__cspViolations || []")]

    def assert_clean(self) -> None:
        assert self.violations == []
        assert self.console == []
        assert self.errors == []
        assert self.outside == []
        assert self.headers and [u for u, h in self.headers.items() if not h or "default-src 'self'" not in h] == []


@pytest.fixture
def guarded(page: Page) -> Iterator[tuple[Page, Watch]]:
    watch = Watch()
    page.add_init_script(LISTEN)
    page.on("console", lambda m: watch.console.append(m.text) if "Content Security Policy" in m.text else None)
    page.on("pageerror", lambda e: watch.errors.append(str(e)))
    page.on("console", lambda m: watch.console_errors.append(f"{page.url}: {m.text}") if m.type == "error" else None)
    page.on("response", lambda r: watch.failed.append(f"{r.status} {r.url}") if r.status >= 400 else None)

    def on_response(r):
        if r.request.resource_type in ("document", "fetch", "xhr"):
            watch.headers[f"{r.request.method} {r.url}"] = r.headers.get("content-security-policy")

    page.on("response", on_response)

    def local_only(route: Route) -> None:
        if urlsplit(route.request.url).hostname in ("127.0.0.1", "localhost"):
            route.continue_()
        else:
            watch.outside.append(route.request.url)
            route.abort()

    page.route("**/*", local_only)
    yield page, watch


@dataclass
class World:
    completed: str
    waiting: str
    suspended: str
    waitpoint_id: str
    streaming: str
    flow_id: str
    flow_members: int
    budget_id: str
    quota_id: str


def _world(backend) -> World:
    """Something on every page, made by the engine itself: a worker, executions in each state, a waitpoint,
    an attempt stream, a flow with a finished root, a budget with usage and a quota policy."""
    hmac_secrets.install(backend, SECRET)
    c = Client(backend)

    def worker(lane: str) -> Worker:  # its heartbeat outlives the walk (it never beats again)
        return Worker(backend, WorkerConfig(lanes=(lane,), worker_id="w-csp", worker_instance_id=f"w-csp-{lane}",
                                            heartbeat_interval_ms=120_000))

    w = worker("default")
    w.heartbeat.register()
    completed = c.create(kind="report", payload=b'{"user": "ann", "n": [1, 2]}', tags={"team": "blue"}).execution_id
    (t,) = w.claim_next(1)
    t.complete(b'{"ok": true}')
    waiting = c.create(kind="report", payload=b"{}").execution_id

    suspended = c.create(kind="approve", lane="approvals").execution_id
    (t,) = worker("approvals").claim_next(1)
    wp = t.suspend("approved", timeout_ms=600_000, reason_code="waiting_for_approval")

    streaming = c.create(kind="llm", lane="llm").execution_id
    (t,) = worker("llm").claim_next(1)
    for n in range(5):
        t.append_frame("token", f"word {n}")

    flows = Flows(backend)
    fid = flows.create(kind="pipeline")
    members = [{"kind": k, "lane": "flows"} for k in ("start", "left", "right", "end")]
    ids = flows.build(fid, members, [(0, 1), (0, 2), (1, 3), (2, 3)])
    (t,) = worker("flows").claim_next(1)
    assert t.execution_id == ids[0]
    t.complete()
    resolve_outgoing(backend, [(ids[0], fid, "success")])

    bid, _ = create_budget(backend, hard={"tokens": 100}, soft={"tokens": 50})
    report_usage(backend, bid, {"tokens": 60})
    qid, _ = create_quota_policy(backend, window_seconds=10, max_requests_per_window=5, max_concurrent=2)
    return World(completed, waiting, suspended, wp.waitpoint_id, streaming, fid, len(members), bid, qid)


def test_every_page_runs_under_the_policy_without_a_violation(guarded, asgi_server, backend):
    page, watch = guarded
    world = _world(backend)
    base = asgi_server.url

    def visit(path: str, *ready) -> None:
        response = page.goto(base + path)
        assert response is not None and response.ok, path
        assert "default-src 'self'" in (response.headers.get("content-security-policy") or ""), path
        for check in ready:  # each page's own scripts have run (or its content is there)
            check()
        watch.collect(page)

    sign_in(page, base, "otto", PASSWORD)  # the login page, under the same listener
    watch.collect(page)
    visit("/", lambda: expect(page.locator("#state-counts")).to_contain_text("default"),
          lambda: expect(page.locator("body")).to_have_attribute("data-live", "on"))  # ws under connect-src
    visit("/system/", lambda: expect(page.locator("[data-fact=library]")).to_be_visible())
    visit("/executions/", lambda: expect(page.locator("#executions")).to_contain_text(world.waiting),
          lambda: expect(page.locator("body")).to_have_attribute("data-live", "on"))
    visit(f"/executions/{world.completed}/", lambda: expect(page.locator("#attempts")).to_contain_text("success"),
          lambda: expect(page.locator("#input .jsontree")).to_contain_text("ann"))
    visit(f"/executions/{world.suspended}/", lambda: expect(page.locator("#suspension")).to_be_visible(),
          lambda: expect(page.locator(f"#wp-signal-{world.waitpoint_id}")).to_have_count(1))
    visit("/flows/", lambda: expect(page.locator("body")).to_contain_text(world.flow_id))
    visit(f"/flows/{world.flow_id}/",
          lambda: expect(page.locator("#flow-svg g.node")).to_have_count(world.flow_members),  # dagre laid it out
          lambda: expect(page.locator("#flow-svg path.e-satisfied")).to_have_count(2))
    visit("/waitpoints/", lambda: expect(page.locator(f"#wp-{world.waitpoint_id}")).to_contain_text("approved"))
    # The gauges are re-rendered on the server and pushed (no polling): one push swapped in under the policy.
    pushed = re.compile(r"^[1-9]")
    visit("/budgets/", lambda: expect(page.locator(f"#budget-{world.budget_id}")).to_be_visible(),
          lambda: expect(page.locator("body")).to_have_attribute("data-live-pushes", pushed, timeout=10_000))
    visit(f"/budgets/{world.budget_id}/", lambda: expect(page.locator("meter")).to_have_attribute("value", "60"))
    visit("/quotas/", lambda: expect(page.locator("body")).to_contain_text(world.quota_id),
          lambda: expect(page.locator("body")).to_have_attribute("data-live-pushes", pushed, timeout=10_000))
    visit(f"/quotas/{world.quota_id}/", lambda: expect(page.locator("h1")).to_contain_text(world.quota_id))
    visit(f"/executions/{world.streaming}/attempts/0/stream/",
          lambda: expect(page.locator("#frames li.frame")).to_have_count(5),
          lambda: expect(page.locator("#stream")).to_have_attribute("data-connected", "1"))
    visit("/workers/", lambda: expect(page.locator("#workers")).to_contain_text("w-csp-default"))

    # htmx swaps under the policy: a bulk preview, then an action whose audit entry the audit page shows.
    visit("/executions/?kind=report", lambda: expect(page.locator("#executions")).to_contain_text(world.waiting))
    page.click("details.bulk summary")
    page.fill("#bulk input[name=reason]", "look only")
    page.click("#bulk-preview")
    expect(page.locator("#bulk [data-count]")).to_be_visible()
    watch.collect(page)
    visit(f"/executions/{world.waiting}/")
    page.locator("#action-cancel input[name='cancel-reason']").fill("csp walk")
    page.locator("#action-cancel button").click()
    expect(page.locator("#action-cancel .outcome")).to_have_text("Cancelled.")
    watch.collect(page)
    visit("/audit/", lambda: expect(page.locator("#audit")).to_contain_text("csp walk"))

    visit("/api/docs", lambda: expect(page.get_by_text("/v1/executions", exact=True).first).to_be_visible())
    visit(f"/executions/{world.completed}/attempts/diff?a=0&b=0",
          lambda: expect(page.locator("#diff-facts")).to_be_visible())
    # The icon every page links, and what a browser asks for by itself, both load.
    icon = page.locator("link[rel=icon]").get_attribute("href")
    assert icon and page.request.get(base + icon).ok
    favicon = page.request.get(base + "/favicon.ico")
    assert favicon.ok and favicon.headers["content-type"].startswith("image/svg")
    assert watch.console_errors == [] and watch.failed == []  # before the deliberate 404 below
    response = page.goto(base + "/executions/{fp:1}:6ba7b810-9dad-11d1-80b4-00c04fd430c8/")  # not found
    assert response is not None and response.status == 404
    assert "default-src 'self'" in (response.headers.get("content-security-policy") or "")
    watch.collect(page)
    page.click("button:text('Sign out')")
    page.wait_for_url("**/login/")
    watch.collect(page)

    watch.assert_clean()
    assert len(watch.headers) > 20


def test_the_api_docs_render_offline_from_our_own_files(guarded, asgi_server):
    page, watch = guarded
    sign_in(page, asgi_server.url, "vera", PASSWORD)
    page.goto(asgi_server.url + "/api/docs")
    expect(page.get_by_text("/v1/executions", exact=True).first).to_be_visible()
    expect(page.locator(".opblock").first).to_be_visible()  # the operations list, drawn by Swagger UI
    watch.collect(page)
    watch.assert_clean()


def test_the_api_docs_send_an_anonymous_browser_to_sign_in(guarded, asgi_server):
    page, watch = guarded
    page.goto(asgi_server.url + "/api/docs")
    page.wait_for_url(lambda url: url.endswith("/login/?next=/api/docs"))
    watch.collect(page)
    watch.assert_clean()
