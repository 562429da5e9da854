"""Take the README's screenshots: start `up --demo`, let the workload run, photograph each main page.

    python docs/screenshots.py                 # writes docs/screenshots/*.png
    python docs/screenshots.py --wait 30       # a shorter warm-up (the overview charts stay sparse)
    python docs/screenshots.py --url http://127.0.0.1:8000 --password …   # an `up --demo` already running

Uses Playwright with Debian's chromium (apt-get install -y chromium).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "docs" / "screenshots"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]
PAGES = [("overview", "/"), ("executions", "/executions/"), ("waitpoints", "/waitpoints/"), ("flows", "/flows/"),
         ("budgets", "/budgets/"), ("quotas", "/quotas/"), ("schedules", "/schedules/"), ("workers", "/workers/"),
         ("audit", "/audit/")]


def snap(page: Any, name: str) -> None:
    page.wait_for_load_state("networkidle")
    page.screenshot(path=str(OUT / f"{name}.png"))
    print(f"  {name}.png", flush=True)


def shoot(page: Any, base: str, suffix: str) -> None:
    """Every main page, then an execution, a flow's DAG and a schedule."""
    for name, path in PAGES:
        page.goto(base + path)
        snap(page, name + suffix)
    # A `transform` pipeline step whose first attempt failed (the demo's handler always fails it once) and whose
    # retry completed: the why line and facts, then its attempts with the failure's traceback open and its History.
    page.goto(base + "/executions/?kind=transform&state=completed")
    link = page.locator("#executions tbody a").first
    if link.count():
        link.click()
        snap(page, "execution" + suffix)
        tb = page.locator("#attempts details.traceback summary").first
        if tb.count():
            tb.click()
        page.locator("#attempts").evaluate("t => t.closest('section').scrollIntoView()")
        page.screenshot(path=str(OUT / f"execution-history{suffix}.png"))
        print(f"  execution-history{suffix}.png", flush=True)
        diff = page.locator("#attempts a.diff-link").first
        if diff.count():
            diff.click()
            snap(page, "attempt-diff" + suffix)
    # A finished fan-out: split → four chunks → merge, each node named by its kind and short id.
    page.goto(base + "/flows/")
    flow = page.locator("main table tbody tr", has_text="fan-out").filter(has_text="completed").locator("a").first
    if flow.count():
        flow.click()
        page.wait_for_load_state("networkidle")
        time.sleep(1)  # the DAG lays itself out after load
        snap(page, "flow" + suffix)
    page.goto(base + "/schedules/")
    sched = page.locator("#schedule-list tbody a", has_text="inbox-sweep").first
    if sched.count():
        sched.click()
        snap(page, "schedule" + suffix)


def photograph(base: str, password: str) -> None:
    from playwright.sync_api import sync_playwright

    OUT.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=shutil.which("chromium") or "/usr/bin/chromium", args=ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 860})
        page.goto(base + "/login/")
        page.fill("#id_username", "demo")
        page.fill("#id_password", password)
        page.click("button[type=submit]")
        page.wait_for_url(base + "/")
        # The demo account keeps the theme "auto", which follows the (emulated) system preference.
        for scheme, suffix in (("dark", ""), ("light", "-light")):
            page.emulate_media(color_scheme=scheme)  # type: ignore[arg-type]
            shoot(page, base, suffix)
        browser.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wait", type=float, default=150, help="seconds of demo workload before the first photo")
    ap.add_argument("--url", help="photograph this running `up --demo` instead of starting one")
    ap.add_argument("--password", help="the demo account's password (with --url)")
    args = ap.parse_args(argv)
    if args.url:
        if not args.password:
            ap.error("--url needs --password (up --demo prints it once)")
        photograph(args.url.rstrip("/"), args.password)
        return 0

    sys.path.insert(0, str(REPO))
    from ffcore.embedded import free_port

    port = free_port()
    tmp = tempfile.mkdtemp(prefix="ff-shots-")
    env = {k: v for k, v in os.environ.items() if not k.startswith("FF_")}
    env.update({"FF_DATA_DIR": tmp, "DJANGO_SECRET_KEY": "screenshots"})
    proc = subprocess.Popen([sys.executable, "manage.py", "up", "--demo", "--port", str(port)], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        password = None
        while password is None:
            line = proc.stdout.readline() if proc.stdout else ""
            if not line:
                raise SystemExit("up --demo exited before printing the demo account")
            if m := re.search(r"username: demo\s+password: (\S+)", line):
                password = m.group(1)
        print(f"demo running; letting the workload build up for {args.wait:g} s (the overview charts want minutes)…",
              flush=True)
        # Keep reading up's output: a full pipe would stall its logging (and so the demo) during the wait.
        threading.Thread(target=lambda: proc.stdout and proc.stdout.read(), daemon=True).start()
        time.sleep(args.wait)
        photograph(f"http://127.0.0.1:{port}", password)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
