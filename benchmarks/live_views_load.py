"""Live views under load (issue #36, D4): 50 websocket viewers on the executions list and 50 on the overview.

    python benchmarks/live_views_load.py                       # 50 + 50 viewers, 60 s
    python benchmarks/live_views_load.py --viewers 10 --seconds 10   # the --quick variant

Starts a non-persistent embedded Valkey, daphne (its own SQLite database and users, as the live browser tests do)
and the `up --demo` workload as `up` runs it (two demo workers and the generator, as subprocesses). N autobahn
viewers per page register the page's live views over /ws/live/ exactly as live.js does. Every 2 s the benchmark
cancels one of its marker executions (made at the start) and creates one on a lane of its own (`mark-<n>`): the
executions-list viewers see the cancellation in the marker's pushed row, the overview viewers the new lane in the
pushed state table. Latency = first sight in a viewer − create
(same machine clock), over every viewer and marker. Also: the dashboard process's CPU (utime+stime of daphne,
in cores) over the run, and HTTP requests made by idle Chromium tabs on both pages, per tab per minute.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from autobahn.asyncio.websocket import WebSocketClientFactory, WebSocketClientProtocol  # noqa: E402

from ffcore.backend import Backend  # noqa: E402
from ffcore.embedded import EmbeddedValkey  # noqa: E402
from ffcore.execution.client import Client  # noqa: E402
from ffcore.settings import Settings  # noqa: E402
from tests.browser.asgi_server import PASSWORD, REPO, start  # noqa: E402

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"]
MARK_EVERY_S = 2.0
_LANE = re.compile(r"lane=(mark-\d+)")
_ROW = re.compile(r'<tr[^>]*data-eid="([^"]+)"(.*?)</tr>', re.S)
PAGES = {  # what live.js registers on each page (tests/browser/test_live_push_browser.py checks the pages)
    "executions": {"id": "execution-rows", "url": "/live/rows/", "topics": ["executions"], "mode": "rows"},
    "overview": {"id": "overview-live", "url": "/", "topics": ["overview"], "mode": "swap"},
}


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))] if s else float("nan")


def chromium_path() -> str:
    return os.environ.get("FF_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Viewer(WebSocketClientProtocol):
    def onOpen(self) -> None:  # noqa: N802
        self.sendMessage(json.dumps({"views": [PAGES[self.factory.page]], "fresh": False}).encode())
        self.factory.opened.set()

    def onMessage(self, payload: bytes, is_binary: bool) -> None:  # noqa: N802
        now = time.time()
        m = json.loads(payload)
        if m.get("type") != "view":
            return
        seen = self.factory.seen
        if self.factory.page == "executions":  # a marker's row once it shows the cancellation
            found = [eid for eid, row in _ROW.findall(m["html"]) if "cancelled" in row]
        else:
            found = _LANE.findall(m["html"])
        for key in found:
            seen.setdefault(key, now)


async def viewers(base: str, cookie: str, page: str, n: int) -> list[WebSocketClientFactory]:
    host, port = base.removeprefix("http://").split(":")
    loop = asyncio.get_running_loop()
    out = []
    for _ in range(n):
        f = WebSocketClientFactory(f"ws://{host}:{port}/ws/live/?topics=", origin=base,
                                   headers={"Cookie": f"sessionid={cookie}"})
        f.protocol, f.page, f.seen, f.opened = Viewer, page, {}, asyncio.Event()
        await loop.create_connection(f, host, int(port))
        await asyncio.wait_for(f.opened.wait(), 10)
        out.append(f)
    return out


def sign_in_and_idle_tabs(base: str, seconds: float) -> tuple[str, dict[str, float]]:
    """A session cookie for the viewers, and requests per idle tab per minute on both pages (Chromium)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=chromium_path(), headless=True, args=CHROMIUM_ARGS)
        ctx = b.new_context()
        p = ctx.new_page()
        p.goto(base + "/login/")
        p.fill("#id_username", "vera")
        p.fill("#id_password", PASSWORD)
        p.click("button[type=submit]")
        p.wait_for_url(base + "/")
        cookie = next(c["value"] for c in ctx.cookies() if c["name"] == "sessionid")
        counts: dict[str, list[str]] = {}
        for path in ("/", "/executions/"):
            tab = ctx.new_page()
            tab.goto(base + path)
            tab.wait_for_selector("body[data-live=on]")
            counts[path] = []
            tab.on("request", lambda r, path=path: counts[path].append(r.url))
        time.sleep(seconds)
        b.close()
    return cookie, {k: len(v) * 60 / seconds for k, v in counts.items()}


async def measure(base: str, cookie: str, backend: Backend, n: int, seconds: float, pid: int) -> None:
    client = Client(backend)
    marks_n = int(seconds / MARK_EVERY_S) + 1
    waiting = [client.create(kind="bench-mark", lane="marks").execution_id for _ in range(marks_n)]
    groups = {page: await viewers(base, cookie, page, n) for page in PAGES}
    await asyncio.sleep(2.0)
    marks: list[tuple[str, str, float]] = []
    cpu0, t0 = cpu_s(pid), time.monotonic()
    k = 0
    while time.monotonic() - t0 < seconds:
        lane = f"mark-{k}"
        eid = waiting[k]
        at = time.time()
        client.cancel(eid, reason="benchmark marker")
        client.create(kind="bench-mark", lane=lane)
        marks.append((eid, lane, at))
        k += 1
        await asyncio.sleep(MARK_EVERY_S)
    cores = (cpu_s(pid) - cpu0) / (time.monotonic() - t0)
    await asyncio.sleep(3.0)  # the last marker's pushes
    for page, fs in groups.items():
        lat, missed = [], 0
        for eid, lane, at in marks:
            key = eid if page == "executions" else lane
            for f in fs:
                if key in f.seen:
                    lat.append((f.seen[key] - at) * 1000)
                else:
                    missed += 1
        print(f"{page}: {n} viewers x {len(marks)} changes: change -> visible p50 {pct(lat, 50):.0f} ms · "
              f"p95 {pct(lat, 95):.0f} ms · max {max(lat, default=float('nan')):.0f} ms · not seen {missed}")
    print(f"dashboard process CPU over {seconds:g} s: {cores:.2f} cores")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--viewers", type=int, default=50, help="viewers per page")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--idle-seconds", type=float, default=60.0, help="how long the idle Chromium tabs are counted")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        valkey = EmbeddedValkey(Path(tmp) / "valkey", persistent=False).start()
        server, children = None, []
        try:
            backend = Backend.connect(Settings.from_url(valkey.url))
            server = start(Path(tmp), valkey.url)
            django = [sys.executable, "-m", "django"]
            worker = [*django, "ffworker", "--module", "dashboard.demo.handlers",
                      "--lanes", "demo,llm,emails,approvals",
                      "--concurrency", "6", "--worker-id"]
            for cmd in (worker + ["demo-a"], worker + ["demo-b"], [*django, "ffdemo"]):
                children.append(subprocess.Popen(cmd, env=server.env, cwd=REPO, stdout=subprocess.DEVNULL,
                                                 stderr=subprocess.DEVNULL))
            time.sleep(3.0)  # the demo gets going
            cookie, idle = sign_in_and_idle_tabs(server.url, args.idle_seconds)
            for path, per_min in idle.items():
                print(f"idle Chromium tab on {path}: {per_min:.1f} HTTP requests per minute")
            asyncio.run(measure(server.url, cookie, backend, args.viewers, args.seconds, server.proc.pid))
        finally:
            for c in children:
                c.terminate()
            for c in children:
                try:
                    c.wait(10)
                except subprocess.TimeoutExpired:
                    c.kill()
            if server is not None:
                server.stop()
            valkey.stop()


if __name__ == "__main__":
    main()
