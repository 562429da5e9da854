"""Issue #20, finding 1, as the attack it was: a page from another origin, open in the same browser as a
signed-in operator, `fetch()`es writes at the API and at a dashboard action. Nothing changes in Valkey.

The attacker's page is served from another port of 127.0.0.1: the same *site* as the dashboard, so the
browser sends the operator's SameSite=Lax session cookie along — the hardest case. The dashboard runs
without FF_API_TOKEN (the weakest configuration: no token at all)."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page

from ffcore.execution.client import Client
from ffcore.suspension import hmac_secrets
from tests.browser.asgi_server import PASSWORD
from tests.browser.conftest import sign_in
from tests.browser.foreign_site import ForeignPage
from tests.ffcore.suspension_support import with_secrets
from tests.keyspace import changed, keyspace

pytestmark = [pytest.mark.browser]

ATTACK = """<!doctype html><title>cute cats</title><body>
<form id="f" method="post" action="{base}/executions/{eid}/cancel" target="sink">
  <input name="reason" value="drive-by"></form><iframe name="sink"></iframe>
<script>
const base = "{base}";
const shots = [
  ["/v1/executions", "no-cors", "text/plain", JSON.stringify({{execution_kind: "evil"}})],
  ["/v1/executions", "cors", "application/json", JSON.stringify({{execution_kind: "evil"}})],
  ["/v1/executions/{eid}/cancel", "no-cors", "text/plain", JSON.stringify({{reason: "drive-by"}})],
  ["/v1/admin/rotate-waitpoint-secret", "no-cors", "text/plain",
   JSON.stringify({{new_kid: "evil", new_secret_hex: "abababababababababababababababab"}})],
  ["/executions/{eid}/cancel", "no-cors", "application/x-www-form-urlencoded", "reason=drive-by"],
];
Promise.allSettled(shots.map(([path, mode, type, body]) => fetch(base + path,
    {{method: "POST", mode, credentials: "include", headers: {{"Content-Type": type}}, body}})))
  .then(() => {{ document.getElementById("f").submit(); window.fired = true; }});
</script></body>"""



def test_a_page_from_another_origin_cannot_write_through_the_operators_browser(
        page: Page, asgi_server, attacker_site, backend):
    with_secrets(backend)
    kid = hmac_secrets.list_kids(backend).current_kid
    eid = Client(backend).create(kind="report").execution_id
    sign_in(page, asgi_server.url, "otto", PASSWORD)  # an operator, signed in
    ForeignPage.body = ATTACK.format(base=asgi_server.url, eid=eid).encode()
    before = keyspace(backend)
    answers: dict[str, int] = {}
    page.on("response", lambda r: answers.__setitem__(f"{r.request.method} {r.url}", r.status)
            if r.url.startswith(asgi_server.url) else None)
    page.goto(attacker_site + "/")
    page.wait_for_function("window.fired === true")
    page.wait_for_timeout(1500)  # the form post lands in the iframe
    # The server's own request counters (ff:metrics:*) may flush meanwhile: they count the refusals, no attack wrote.
    assert [k for k in changed(before, keyspace(backend)) if not k.startswith("ff:metrics:")] == []
    assert Client(backend).get_state(eid).value == "waiting"
    assert hmac_secrets.list_kids(backend).current_kid == kid
    # Every attempt that reached the server was refused there (the CORS JSON one never leaves the browser).
    posts = {k: v for k, v in answers.items() if k.startswith("POST ")}
    assert posts, answers
    assert all(status in (401, 403, 415) for status in posts.values()), posts
    dashboard_cancels = [k for k in posts if k.endswith("/cancel") and "/v1/" not in k]
    assert len(dashboard_cancels) >= 1, posts  # the fetch (and the form post) reached the action and were refused
    assert sum(1 for k in posts if "/v1/" in k) >= 3, posts
