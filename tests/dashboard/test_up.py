"""`manage.py up`: embedded Valkey, library, dashboard; Ctrl-C stops everything; clear start-up errors."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

import redis

from ffcore import secret_files
from ffcore.embedded import free_port
from tests.conftest import REPO


def _env(tmp_path, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("FF_")}
    env.update({"FF_DATA_DIR": str(tmp_path), "DJANGO_SECRET_KEY": "test", **extra})
    return env


def _start_up(tmp_path, port):
    return subprocess.Popen(
        [sys.executable, "manage.py", "up", "--port", str(port)], cwd=REPO, env=_env(tmp_path),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )


def _valkey(data_dir, port: int, **kwargs) -> redis.Redis:
    """A client of the embedded server `up` runs on `data_dir`: it requires the password kept there."""
    return redis.Redis(port=port, password=secret_files.read(secret_files.valkey_password_file(data_dir)), **kwargs)


def _wait_http(url: str, proc, timeout=60.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stdout.read()
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.3)
    raise AssertionError(f"{url} never answered")


def _read_until(proc, pattern: str, lines: list[str]) -> re.Match[str]:
    while True:
        line = proc.stdout.readline()
        assert line, "".join(lines)
        lines.append(line)
        m = re.search(pattern, line)
        if m:
            return m


def test_up_serves_the_dashboard_with_the_library_loaded_and_stops_cleanly(tmp_path):
    port = free_port()
    proc = _start_up(tmp_path, port)
    lines: list[str] = []
    try:
        m = _read_until(proc, r"embedded Valkey on (valkey://127\.0\.0\.1:(\d+)/0)", lines)
        vport = int(m.group(2))
        _read_until(proc, rf"dashboard on http://127\.0\.0\.1:{port}/", lines)
        assert _wait_http(f"http://127.0.0.1:{port}/login/", proc) == 200
        v = _valkey(tmp_path, vport)
        assert v.fcall("ff_version", 0) == b"6"
        assert v.hget("ff:config:partitions", "num_flow_partitions") == b"256"
        v.set("marker", "kept")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
        # A quiet terminal (#25): a banner with the sign-in, the data dir and where the access log went; no
        # request lines, no server chatter.
        out = "".join(lines) + proc.stdout.read()
        assert f"data dir    {tmp_path}" in out and "sign in     a Django user" in out
        assert f"access log  {tmp_path / 'logs' / 'access.log'}" in out
        assert "signing key for waitpoint signal tokens: ready on all 256 partitions" in out
        assert "GET /login/" not in out and "Listening on" not in out and "\n\n" not in out
        assert "GET /login/" in (tmp_path / "logs" / "access.log").read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
    # Everything it started is gone: the embedded server no longer answers.
    try:
        _valkey(tmp_path, vport, socket_connect_timeout=0.5).ping()
        raise AssertionError("embedded valkey still running")
    except redis.ConnectionError:
        pass
    # Data lives under FF_DATA_DIR/valkey with AOF and is reused on the next start.
    assert (tmp_path / "valkey").is_dir()
    proc = _start_up(tmp_path, port)
    lines = []
    try:
        m = _read_until(proc, r"embedded Valkey on valkey://127\.0\.0\.1:(\d+)/0", lines)
        _read_until(proc, r"dashboard on", lines)
        assert _valkey(tmp_path, int(m.group(1))).get("marker") == b"kept"
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)


def _up_error(tmp_path, **env) -> tuple[int, str]:
    out = subprocess.run([sys.executable, "manage.py", "up", "--port", str(free_port())], cwd=REPO,
                         env=_env(tmp_path, **env), capture_output=True, text=True, timeout=60)
    return out.returncode, out.stdout + out.stderr


def test_up_with_an_unreachable_valkey_gives_one_clear_line(tmp_path):
    code, output = _up_error(tmp_path, FF_VALKEY_URL=f"valkey://127.0.0.1:{free_port()}/0")
    assert code != 0
    assert "Traceback" not in output
    assert "cannot reach Valkey" in output
    assert len(output.strip().splitlines()) == 1


def test_up_with_mismatched_partition_counts_refuses(tmp_path, backend):
    code, output = _up_error(tmp_path, FF_VALKEY_URL=backend.url, FF_FLOW_PARTITIONS="64")
    assert code != 0
    assert "Traceback" not in output
    assert "num_flow_partitions: stored '256', configured '64'" in output
    assert len(output.strip().splitlines()) == 1
