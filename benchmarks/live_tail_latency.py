"""Live tail latency (DESIGN §5, D3): append → visible in a browser, and 50 viewers of one stream at 1,000 frames/s.

    python benchmarks/live_tail_latency.py                    # both parts
    python benchmarks/live_tail_latency.py --frames 300 --viewers 50 --rate 1000 --seconds 5

Starts a non-persistent embedded Valkey and daphne (its own SQLite database and users, as the live browser
tests do). Part 1 opens the tail page in Debian's chromium and appends frames at a steady pace; the page
records, per frame, when the frame's row was inserted; latency = insert time − append time (same machine
clock). Part 2 connects N websocket viewers (autobahn, no browser) to one stream, appends at `--rate` for
`--seconds` and reports per-frame delivery latency over every viewer, whether each viewer got every
frame in order, and how far the slowest viewer lagged behind the writer at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from autobahn.asyncio.websocket import WebSocketClientFactory, WebSocketClientProtocol  # noqa: E402

from ffcore import functions as F  # noqa: E402
from ffcore.backend import Backend  # noqa: E402
from ffcore.embedded import EmbeddedValkey  # noqa: E402
from ffcore.execution.client import Client  # noqa: E402
from ffcore.settings import Settings  # noqa: E402
from ffcore.worker.task import ClaimedTask  # noqa: E402
from ffcore.worker.worker import Registry, Worker, WorkerConfig  # noqa: E402
from tests.browser.asgi_server import PASSWORD, start  # noqa: E402

# (not imported from tests.browser.conftest: that pulls in Django, whose daphne app pins txaio to twisted)
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"]


def chromium_path() -> str:
    return os.environ.get("FF_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"

_TS = re.compile(r'<pre class="fbody">([0-9.]+)</pre>')
_ID = re.compile(r'data-id="([0-9]+-[0-9]+)"')


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))] if s else float("nan")


def claimed(backend: Backend) -> ClaimedTask:
    Client(backend).create(kind="bench-stream")
    (t,) = Worker(backend, WorkerConfig(worker_instance_id=f"bench-{time.monotonic_ns()}",
                                        lease_ttl_ms=600_000), Registry()).claim_next(1)
    return t


# ------------------------------------------------------------------ part 1: a real browser
OBSERVER = """
window.__lat = [];
new MutationObserver((muts) => {
  const now = Date.now();
  for (const m of muts) for (const n of m.addedNodes) {
    const pre = n.querySelector && n.querySelector("pre.fbody");
    if (pre) window.__lat.push(now - Number(pre.textContent));
  }
}).observe(document.getElementById("frames"), { childList: true });
"""


def browser_latency(base: str, backend: Backend, frames: int, pace_s: float) -> tuple[list[float], str]:
    from playwright.sync_api import sync_playwright

    task = claimed(backend)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium_path(), headless=True, args=CHROMIUM_ARGS)
        # The harness's own probes (wait_for_function) are evaluated strings, which the dashboard's CSP
        # forbids to page scripts; the page's own code runs under the policy as usual.
        page = browser.new_context(bypass_csp=True).new_page()
        page.goto(base + "/login/")
        page.fill("#id_username", "vera")
        page.fill("#id_password", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(base + "/")
        cookie = next(c["value"] for c in page.context.cookies() if c["name"] == "sessionid")
        page.goto(f"{base}/executions/{task.execution_id}/attempts/0/stream/")
        page.wait_for_selector("#stream[data-connected='1']")
        page.evaluate(OBSERVER)
        time.sleep(0.5)  # the tailer starts
        for _ in range(frames):
            task.append_frame("token", f"{time.time() * 1000:.3f}")
            time.sleep(pace_s)
        page.wait_for_function(f"window.__lat.length >= {frames}", timeout=30_000)
        lat = page.evaluate("window.__lat")
        browser.close()
    task.complete()
    return [float(x) for x in lat], cookie


# ------------------------------------------------------------------ part 2: many viewers
class Viewer(WebSocketClientProtocol):
    def onOpen(self) -> None:  # noqa: N802 - autobahn's API
        self.factory.opened.set()

    def onMessage(self, payload: bytes, is_binary: bool) -> None:  # noqa: N802
        now = time.time() * 1000
        m = json.loads(payload)
        if m["type"] != "frames":
            return
        st = self.factory.stats
        st["ids"] += _ID.findall(m["html"])
        st["lat"] += [now - float(ts) for ts in _TS.findall(m["html"])]
        st["last_at"] = now


async def many_viewers(base: str, cookie: str, backend: Backend, viewers: int, rate: int,
                       seconds: float) -> None:
    task = claimed(backend)
    host, port = base.removeprefix("http://").split(":")
    url = f"ws://{host}:{port}/ws/stream/{task.execution_id}/0/?after=0-0"
    loop = asyncio.get_running_loop()
    factories = []
    for _ in range(viewers):
        f = WebSocketClientFactory(url, origin=base, headers={"Cookie": f"sessionid={cookie}"})
        f.protocol = Viewer
        f.opened = asyncio.Event()
        f.stats = {"ids": [], "lat": [], "last_at": 0.0}
        await loop.create_connection(f, host, int(port))
        await asyncio.wait_for(f.opened.wait(), 10)
        factories.append(f)
    await asyncio.sleep(1.0)  # the tailer starts

    sent: list[str] = []
    done_at = [0.0]

    def writer() -> None:
        # Pipelined appends in 10 ms slices keep a steady rate without one round trip per frame.
        per_slice = max(1, rate // 100)
        t0 = time.monotonic()
        for n in range(int(seconds * 100)):
            calls = [F.append_frame(task.keys, task.fence, frame_type="token", ts=int(time.time() * 1000),
                                    payload=f"{time.time() * 1000:.3f}".encode()) for _ in range(per_slice)]
            sent.extend(r[0] for r in backend.call_many(calls) if isinstance(r, F.Reply))
            ahead = t0 + (n + 1) / 100 - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
        done_at[0] = time.time() * 1000

    th = threading.Thread(target=writer)
    th.start()
    while th.is_alive():
        await asyncio.sleep(0.1)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(len(f.stats["ids"]) < len(sent) for f in factories):
        await asyncio.sleep(0.1)
    complete = sum(1 for f in factories if f.stats["ids"] == sent)
    lat = [x for f in factories for x in f.stats["lat"]]
    trail = max(f.stats["last_at"] for f in factories) - done_at[0]
    achieved = len(sent) / seconds
    print(f"\n{viewers} viewers of one stream, writer {achieved:,.0f} frames/s for {seconds:g} s ({len(sent)} frames)")
    print(f"  viewers that got every frame in order, no gaps, no duplicates: {complete}/{viewers}")
    print(f"  delivery latency over all viewers: p50 {pct(lat, 50):.1f} ms · p99 {pct(lat, 99):.1f} ms · "
          f"max {max(lat, default=float('nan')):.1f} ms")
    print(f"  slowest viewer finished {trail:.0f} ms after the last append")
    keeps_up = complete == viewers and pct(lat, 99) < 1000
    print(f"  keeps up: {'yes' if keeps_up else 'NO'} (every frame to every viewer, p99 < 1 s)")
    task.complete()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=300, help="frames for the browser latency part")
    ap.add_argument("--pace-ms", type=float, default=20.0, help="pause between browser-part appends")
    ap.add_argument("--viewers", type=int, default=50)
    ap.add_argument("--rate", type=int, default=1000, help="frames per second in the viewers part")
    ap.add_argument("--seconds", type=float, default=5.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        valkey = EmbeddedValkey(Path(tmp) / "valkey", persistent=False).start()
        server = None
        try:
            backend = Backend.connect(Settings.from_url(valkey.url))
            server = start(Path(tmp), valkey.url)
            lat, cookie = browser_latency(server.url, backend, args.frames, args.pace_ms / 1000)
            print(f"append -> visible in chromium ({len(lat)} frames, one every {args.pace_ms:g} ms): "
                  f"p50 {pct(lat, 50):.1f} ms · p99 {pct(lat, 99):.1f} ms · max {max(lat):.1f} ms")
            asyncio.run(many_viewers(server.url, cookie, backend, args.viewers, args.rate, args.seconds))
        finally:
            if server is not None:
                server.stop()
            valkey.stop()


if __name__ == "__main__":
    main()
