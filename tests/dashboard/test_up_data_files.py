"""`up`'s data files and secrets: owner-only modes, the API token printed once, the embedded server's
password found by ffworker/ffscanners, and the warning when the dashboard is reachable beyond loopback."""

from __future__ import annotations

import asyncio
import io
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from dashboard.runner import Up, UpOptions, is_loopback
from dashboard.settings import channel_layers
from ffcore import secret_files
from ffcore.backend import Backend
from ffcore.embedded import EmbeddedValkey, free_port
from ffcore.settings import Settings
from ffcore.suspension import hmac_secrets
from tests.conftest import REPO
from tests.dashboard.test_up import _env, _read_until, _wait_http

SECRET = "cd" * 32


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def _up(data_dir: Path, port: int, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "manage.py", "up", "--port", str(port)], cwd=REPO,
                            env=_env(data_dir, **env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _stop(proc: subprocess.Popen[str]) -> str:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=30)
    return rest


def _api_status(port: int, token: str | None) -> int:
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/executions?partition=0")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_up_creates_the_api_token_once_hands_it_to_the_dashboard_and_keeps_every_file_owner_only(tmp_path):
    tmp_path = tmp_path / "data"  # not there yet: up creates it (pytest's own tmp dirs are 0700 already)
    port = free_port()
    # No DJANGO_SECRET_KEY: the generated one is kept under the data dir too.
    proc = _up(tmp_path, port, DJANGO_SECRET_KEY="")
    lines: list[str] = []
    try:
        m = _read_until(proc, r"API token created — (\S+)  stored in (\S+)", lines)
        token, where = m.group(1), m.group(2)
        _read_until(proc, r"dashboard on", lines)
        assert where == str(tmp_path / "api_token")
        assert (tmp_path / "api_token").read_text().strip() == token
        assert not any("WARNING" in line for line in lines)  # loopback only
        assert _wait_http(f"http://127.0.0.1:{port}/login/", proc) == 200
        # The dashboard process runs with that token (refused without it, served with it) and reads from the
        # password-protected Valkey.
        assert _api_status(port, None) == 401
        assert _api_status(port, "not-" + token) == 401
        assert _api_status(port, token) == 200
        assert _mode(tmp_path) == 0o700
        for name in ("secret_key", hmac_secrets.SECRET_FILE, "valkey_password", "api_token", "db.sqlite3"):
            assert _mode(tmp_path / name) == 0o600, name
        served = [p for p in (tmp_path / "valkey").rglob("*") if p.is_file()]
        assert any(p.name.endswith(".aof") for p in served), served
        assert {p.name: _mode(p) for p in served} == {p.name: 0o600 for p in served}
    finally:
        _stop(proc)

    # A later start names the file only, and warns once the dashboard may be reached by another host name.
    proc = _up(tmp_path, port, DJANGO_SECRET_KEY="", ALLOWED_HOSTS="127.0.0.1,flows.example.com")
    lines = []
    try:
        _read_until(proc, rf"API token: in {tmp_path / 'api_token'}", lines)
        warning = _read_until(proc, r"WARNING: .*", lines).group(0)
        _read_until(proc, r"dashboard on", lines)
    finally:
        lines.append(_stop(proc))
    assert "flows.example.com" in warning and "FF_API_TOKEN is not set" in warning
    assert "generated API token still protects API writes" in warning
    assert token not in "".join(lines)
    assert (tmp_path / "api_token").read_text().strip() == token


def test_an_explicit_token_is_used_as_given_and_nothing_is_generated(tmp_path, monkeypatch, settings):
    settings.DATA_DIR = tmp_path
    monkeypatch.setenv("FF_API_TOKEN", "chosen-token")
    out = io.StringIO()
    up = Up(UpOptions(host="0.0.0.0"), out=out)
    assert up.exposure_warning() is None  # the operator chose a token: nothing to warn about
    assert up.api_token() == "chosen-token"
    assert not (tmp_path / "api_token").exists()
    assert out.getvalue() == ""


@pytest.mark.parametrize(("host", "allowed", "named"), [
    ("0.0.0.0", ["127.0.0.1", "localhost"], "0.0.0.0"),
    ("::", ["127.0.0.1"], "::"),
    ("192.168.1.20", ["127.0.0.1"], "192.168.1.20"),
    ("127.0.0.1", ["127.0.0.1", "flows.example.com"], "flows.example.com"),
    ("127.0.0.1", ["*"], "*"),
])
def test_up_warns_when_the_dashboard_is_reachable_beyond_loopback_without_a_token(monkeypatch, settings, host,
                                                                                 allowed, named):
    monkeypatch.delenv("FF_API_TOKEN", raising=False)
    settings.ALLOWED_HOSTS = allowed
    warning = Up(UpOptions(host=host)).exposure_warning()
    assert warning is not None and named in warning


def test_loopback_hosts_and_the_default_allowed_hosts_give_no_warning(monkeypatch, settings):
    monkeypatch.delenv("FF_API_TOKEN", raising=False)
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost", "[::1]", "testserver"]
    for host in ("127.0.0.1", "::1", "localhost", "127.0.0.2"):
        assert Up(UpOptions(host=host)).exposure_warning() is None, host
    assert not any(is_loopback(h) for h in ("0.0.0.0", "example.com", "*", ".example.com", "10.0.0.1"))


def _command(data_dir: Path, *args: str) -> subprocess.Popen[str]:
    # No FF_VALKEY_URL: the command must find up's server and its password through FF_DATA_DIR alone.
    env = _env(data_dir, PYTHONUNBUFFERED="1")
    assert "FF_VALKEY_URL" not in env
    return subprocess.Popen([sys.executable, "manage.py", *args], cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def test_ffworker_and_ffscanners_find_the_embedded_server_and_its_password_in_the_data_dir(tmp_path):
    with EmbeddedValkey.for_data_dir(tmp_path) as server:
        backend = Backend.connect(Settings.from_url(server.url))
        try:
            hmac_secrets.install(backend, SECRET)  # ffscanners refuses to start without one
        finally:
            backend.close()
        worker = ["ffworker", "--module", "tests.worker_handlers", "--lanes", "files"]
        for args, started in ((worker, r"worker \S+ · instance \S+ · lanes files"),
                              (["ffscanners"], r"scanners running against")):
            proc = _command(tmp_path, *args)
            lines: list[str] = []
            try:
                _read_until(proc, started, lines)
                assert proc.poll() is None, "".join(lines)  # connected, authenticated and running
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.communicate(timeout=30)


def test_the_channel_layer_works_on_the_password_protected_server(tmp_path):
    from channels_redis.pubsub import RedisPubSubChannelLayer

    with EmbeddedValkey.for_data_dir(tmp_path) as server:
        layer = RedisPubSubChannelLayer(**channel_layers(server.url)["default"]["CONFIG"])  # type: ignore[arg-type]

        async def roundtrip() -> dict[str, object]:
            channel = await layer.new_channel()
            await layer.group_add("files", channel)
            await layer.group_send("files", {"type": "probe", "n": 1})
            try:
                return await asyncio.wait_for(layer.receive(channel), 5)
            finally:
                await layer.flush()

        assert asyncio.run(roundtrip()) == {"type": "probe", "n": 1}


def test_the_settings_create_the_secret_key_and_database_owner_only(tmp_path):
    tmp_path = tmp_path / "data"
    env = _env(tmp_path, DJANGO_SECRET_KEY="")
    env.pop("DATABASE_URL", None)
    out = subprocess.run([sys.executable, "manage.py", "migrate", "--verbosity", "0"], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert _mode(tmp_path) == 0o700
    assert _mode(tmp_path / "secret_key") == 0o600
    assert _mode(tmp_path / "db.sqlite3") == 0o600
    assert (tmp_path / "db.sqlite3").read_bytes().startswith(b"SQLite format 3")
    assert os.path.getsize(tmp_path / "secret_key") > 40
    assert secret_files.read(tmp_path / "secret_key")
