"""Static files served by daphne (issue #37): a path climbing out of /static/ is a 400, never a 500 and never
the file it names."""

from __future__ import annotations

import pytest
from channels.testing import HttpCommunicator

from tests.bounded import arun


def _get(path: str) -> dict:
    from dashboard.asgi import application

    async def main() -> dict:
        comm = HttpCommunicator(application, "GET", path, headers=[(b"host", b"127.0.0.1")])
        await comm.send_input({"type": "http.request", "body": b""})
        start = await comm.receive_output(10)
        body = b""
        while True:  # a streamed file ends with a chunk that may carry no body at all
            chunk = await comm.receive_output(10)
            body += chunk.get("body", b"")
            if not chunk.get("more_body"):
                return {"status": start["status"], "body": body}

    return arun(main())


@pytest.mark.parametrize("path", ["/static/../dashboard/settings.py", "/static/../../etc/passwd",
                                  "/static/dashboard/../../../dashboard/settings.py"])
def test_a_static_path_that_climbs_out_is_refused(path):
    r = _get(path)
    assert r["status"] in (400, 404), r["status"]
    assert b"SECRET_KEY" not in r["body"] and b"root:" not in r["body"]


def test_a_real_static_file_is_still_served():
    r = _get("/static/dashboard/live.js")
    assert r["status"] == 200 and len(r["body"]) > 100
