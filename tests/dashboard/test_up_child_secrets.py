"""`up`'s children and log files (issue #37): handler code in a worker finds no API token and no HMAC secret
in its environment (only the dashboard gets the token), and an access log elsewhere is 0600 in a 0700 dir."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from ffcore.embedded import free_port
from tests.conftest import REPO
from tests.dashboard.test_up import _env, _read_until, _wait_http

TOKEN, SECRET = "tok-" + "9" * 40, "ab" * 32


def _children(pid: int) -> dict[int, str]:
    """Direct children of `pid`: their command lines."""
    out = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                out[int(stat.parent.name)] = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, IndexError, ValueError):
            continue
    return out


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode(errors="replace").split("=", 1) for item in raw if b"=" in item)


def test_workers_get_no_api_token_or_hmac_secret_and_the_access_log_is_private(tmp_path):
    data, log = tmp_path / "data", tmp_path / "elsewhere" / "access.log"
    port = free_port()
    proc = subprocess.Popen([sys.executable, "manage.py", "up", "--port", str(port), "--access-log", str(log)],
                            cwd=REPO, env=_env(data, FF_API_TOKEN=TOKEN, FF_WAITPOINT_HMAC_SECRET=SECRET),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        _read_until(proc, r"dashboard on", [])
        assert _wait_http(f"http://127.0.0.1:{port}/login/", proc) == 200
        deadline = time.monotonic() + 20
        while len(kids := _children(proc.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        dashboard = [p for p, cmd in kids.items() if "daphne" in cmd]
        others = [p for p, cmd in kids.items() if "daphne" not in cmd]
        assert dashboard and others, kids
        assert _environ(dashboard[0]).get("FF_API_TOKEN") == TOKEN
        assert "FF_WAITPOINT_HMAC_SECRET" not in _environ(dashboard[0])
        for pid in others:  # the scanners here; `--demo` workers are started with the same environment
            env = _environ(pid)
            assert "FF_API_TOKEN" not in env and "FF_WAITPOINT_HMAC_SECRET" not in env, kids[pid]
            assert TOKEN not in "".join(env.values()) and SECRET not in "".join(env.values())
        assert log.stat().st_mode & 0o777 == 0o600
        assert log.parent.stat().st_mode & 0o777 == 0o700
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)


def test_the_default_access_log_is_created_private_even_over_an_old_world_readable_one(tmp_path, settings):
    from dashboard.runner import Up, UpOptions

    settings.DATA_DIR = tmp_path
    (tmp_path / "logs").mkdir(mode=0o755)
    (tmp_path / "logs" / "access.log").write_text("old\n")
    (tmp_path / "logs" / "access.log").chmod(0o644)
    path = Path(Up(UpOptions()).access_log_path())
    assert path == tmp_path / "logs" / "access.log" and path.read_text() == "old\n"
    assert path.stat().st_mode & 0o777 == 0o600 and path.parent.stat().st_mode & 0o777 == 0o700
