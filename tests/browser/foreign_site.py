"""A page on another port of the same host: the attacker in the cross-site and cross-port browser tests."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import pytest

from ffcore.embedded import free_port

HARMLESS = b"<!doctype html><title>cute cats</title><body>meow</body>"


class ForeignPage(http.server.BaseHTTPRequestHandler):
    """Serves `body` at every path; a test sets it before sending the browser there."""

    body = HARMLESS

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def attacker_site() -> Iterator[str]:
    ForeignPage.body = HARMLESS
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), ForeignPage)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
