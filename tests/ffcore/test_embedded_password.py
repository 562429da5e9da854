"""The embedded Valkey `up` runs: a generated password, owner-only files, found by other processes."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from ffcore.backend import Backend
from ffcore.connection import display_url, make_client
from ffcore.embedded import ENDPOINT_FILE, EmbeddedValkey, free_port, resolve_settings
from ffcore.errors import ConfigError
from ffcore.keys import ExecKeys
from ffcore.settings import Settings
from tests.conftest import REPO


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"  # not there yet (pytest's own tmp dirs are 0700 already)


@pytest.fixture
def server(data_dir: Path) -> Iterator[EmbeddedValkey]:
    s = EmbeddedValkey.for_data_dir(data_dir).start()
    try:
        yield s
    finally:
        s.stop()


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_it_refuses_a_client_without_the_password_and_accepts_its_url(server, data_dir):
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(port=server.port).ping()
    with pytest.raises(redis.AuthenticationError, match="Authentication required"):  # NOAUTH on RESP2
        redis.Redis(port=server.port, protocol=2).set("k", "v")
    password = (data_dir / "valkey_password").read_text().strip()
    assert server.url == f"valkey://:{password}@127.0.0.1:{server.port}/0"
    assert password not in display_url(server.url)
    backend = Backend.connect(Settings.from_url(server.url))  # version check, partition lock, library load
    try:
        assert backend.client.fcall("ff_version", 0) == b"6"
    finally:
        backend.close()


def test_the_password_never_appears_in_the_process_arguments(server):
    cmdline = Path(f"/proc/{server.proc.pid}/cmdline").read_bytes()
    assert server.password.encode() not in cmdline


def test_the_data_dir_password_and_aof_are_owner_only(server, data_dir):
    make_client(server.url).set("k", "v")
    server.stop()  # SHUTDOWN flushes the AOF
    assert _mode(data_dir) == 0o700
    assert _mode(data_dir / "valkey_password") == 0o600
    files = [p for p in (data_dir / "valkey").rglob("*") if p.is_file()]
    assert any(p.name.endswith(".aof") for p in files), files
    assert {p.name: _mode(p) for p in files} == {p.name: 0o600 for p in files}
    assert {_mode(p) for p in (data_dir / "valkey").rglob("*") if p.is_dir()} == {0o700}


def test_files_written_by_older_versions_are_tightened_on_start(data_dir):
    old = data_dir / "valkey" / "valkey.log"
    old.parent.mkdir(parents=True)
    old.write_text("an old log\n")
    old.chmod(0o644)
    (data_dir / "valkey").chmod(0o755)
    with EmbeddedValkey.for_data_dir(data_dir):
        assert _mode(old) == 0o600
        assert _mode(data_dir / "valkey") == 0o700 and _mode(data_dir) == 0o700


def test_other_processes_find_the_running_server_and_its_password_in_the_data_dir(server, data_dir):
    found = resolve_settings(Settings(data_dir=str(data_dir)))
    assert found.valkey_url == server.url
    assert make_client(found.valkey_url).ping()
    # An FF_VALKEY_URL naming the server without the password gets it added; any other URL is left alone.
    assert resolve_settings(Settings(valkey_url=server.address, data_dir=str(data_dir))).valkey_url == server.url
    other = f"valkey://127.0.0.1:{free_port()}/0"
    assert resolve_settings(Settings(valkey_url=other, data_dir=str(data_dir))).valkey_url == other
    server.stop()
    assert not (data_dir / ENDPOINT_FILE).exists()
    assert resolve_settings(Settings(data_dir=str(data_dir))).valkey_url is None


def test_a_restart_keeps_the_password_and_the_data(data_dir):
    with EmbeddedValkey.for_data_dir(data_dir) as first:
        make_client(first.url).set("marker", "kept")
        password, port = first.password, first.port
    with EmbeddedValkey.for_data_dir(data_dir, port=port) as second:
        assert second.password == password
        assert make_client(second.url).get("marker") == b"kept"


def test_the_library_loader_finds_the_embedded_server_without_a_url(server, data_dir):
    env = {k: v for k, v in os.environ.items() if not k.startswith("FF_")}
    out = subprocess.run([sys.executable, "-m", "ffcore.library"], cwd=REPO, capture_output=True, text=True,
                         timeout=60, env={**env, "FF_DATA_DIR": str(data_dir)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip()  # the build it loaded
    assert make_client(server.url).fcall("ff_version", 0) == b"6"


def _readme_enqueue_example() -> str:
    text = (REPO / "README.md").read_text()
    start = text.index("# myapp/enqueue.py")
    return text[start:text.index("```", start)]


def test_the_readme_enqueue_example_reaches_the_embedded_server_up_runs(server, data_dir, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "FF_VALKEY_URL"}
    out = subprocess.run([sys.executable, "-c", _readme_enqueue_example()], env={**env, "FF_DATA_DIR": str(data_dir)},
                         cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    eid = out.stdout.strip()
    assert make_client(server.url).exists(ExecKeys(eid).core) == 1


def test_the_readme_enqueue_example_uses_a_plain_valkey_url(server, tmp_path):
    env = {**os.environ, "FF_VALKEY_URL": server.url, "FF_DATA_DIR": str(tmp_path / "elsewhere")}
    out = subprocess.run([sys.executable, "-c", _readme_enqueue_example()], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert make_client(server.url).exists(ExecKeys(out.stdout.strip()).core) == 1


def test_without_a_url_or_a_running_up_the_error_says_how_to_connect(tmp_path):
    with pytest.raises(ConfigError) as e:
        Backend.from_env({"FF_DATA_DIR": str(tmp_path)})
    assert "Backend.from_env()" in str(e.value) and "FF_DATA_DIR" in str(e.value) and str(tmp_path) in str(e.value)
