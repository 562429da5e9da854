"""Issue #37, the cross-port websocket hijack, as the attack it was: a page on another port of 127.0.0.1 (the
same *site*, so the operator's SameSite=Lax session cookie rides along) opens the live-updates socket and an
attempt's stream socket. Both are refused and carry nothing; our own page's sockets still open."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page

from ffcore.execution.client import Client
from ffcore.worker.worker import Registry, Worker, WorkerConfig
from tests.browser.asgi_server import PASSWORD
from tests.browser.conftest import sign_in

pytestmark = [pytest.mark.browser]

#: Opens both sockets and records, per socket, whether it opened, how many messages came and the close code.
PROBE = """([base, stream]) => {
  const probe = (path) => new Promise((done) => {
    const r = {opened: false, messages: 0, code: null};
    const ws = new WebSocket(base + path);
    ws.onopen = () => { r.opened = true; };
    ws.onmessage = () => { r.messages += 1; };
    ws.onclose = (e) => { r.code = e.code; done(r); };
    setTimeout(() => { ws.close(); done(r); }, 3000);
  });
  return Promise.all([probe("/ws/live/?topics=executions,overview"), probe(stream)]);
}"""



def test_a_page_on_another_port_cannot_read_live_updates_or_a_stream_while_our_page_can(
        page: Page, asgi_server, attacker_site, backend):
    Client(backend).create(kind="llm")
    (task,) = Worker(backend, WorkerConfig(worker_instance_id="w-xport"), Registry()).claim_next(1)
    task.append_frame("token", "the secret prompt")
    stream = f"/ws/stream/{task.execution_id}/{task.attempt_index}/"
    ws_base = asgi_server.url.replace("http://", "ws://")
    sign_in(page, asgi_server.url, "otto", PASSWORD)  # an operator, signed in

    page.goto(attacker_site + "/")
    live, frames = page.evaluate(PROBE, [ws_base, stream])
    assert not live["opened"] and live["messages"] == 0, live
    assert not frames["opened"] and frames["messages"] == 0, frames

    page.goto(asgi_server.url + "/")  # our own page, same browser, same cookie
    live, frames = page.evaluate(PROBE, [ws_base, stream])
    assert live["opened"], live
    assert frames["opened"] and frames["messages"] >= 1, frames
