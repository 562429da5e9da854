"""Waitpoint HMAC secrets at boot (`up`, `ffscanners`) and the rotation admin command."""

from __future__ import annotations

import signal
import subprocess
import sys

from ffcore.embedded import free_port
from ffcore.keys import PartitionKeys
from ffcore.reads import text
from ffcore.suspension import hmac_secrets
from tests.conftest import REPO
from tests.dashboard.test_up import _env, _read_until, _start_up, _up_error, _valkey

SECRET = "ab" * 32


def test_up_on_the_embedded_valkey_generates_persists_and_installs_a_secret(tmp_path):
    port = free_port()
    proc = _start_up(tmp_path, port)
    lines: list[str] = []
    try:
        m = _read_until(proc, r"embedded Valkey on valkey://127\.0\.0\.1:(\d+)/0", lines)
        _read_until(proc, r"signing key for waitpoint signal tokens: ready on all 256 partitions", lines)
        _read_until(proc, r"dashboard on", lines)
        secret = (tmp_path / hmac_secrets.SECRET_FILE).read_text().strip()
        assert (tmp_path / hmac_secrets.SECRET_FILE).stat().st_mode & 0o077 == 0
        v = _valkey(tmp_path, int(m.group(1)))
        for n in (0, 255):
            sec = PartitionKeys(n).hmac_secrets
            assert v.hget(sec, "current_kid") == b"k1"
            assert text(v.hget(sec, "secret:k1")) == secret
        assert secret not in "".join(lines)  # never printed
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)


def test_up_on_an_external_valkey_refuses_without_a_secret(tmp_path, backend):
    code, output = _up_error(tmp_path, FF_VALKEY_URL=backend.url)
    assert code != 0
    assert "Traceback" not in output
    assert "FF_WAITPOINT_HMAC_SECRET is required" in output.strip().splitlines()[-1]
    assert not backend.client.exists(PartitionKeys(0).hmac_secrets)


def _manage(backend, *args, input=None):
    return subprocess.run([sys.executable, "manage.py", *args], cwd=REPO, capture_output=True, text=True, timeout=60,
                          env=_env(REPO / "var", FF_VALKEY_URL=backend.url), input=input)


def test_the_scanner_process_refuses_to_start_without_any_secret(backend):
    out = _manage(backend, "ffscanners")
    assert out.returncode != 0
    assert "FF_WAITPOINT_HMAC_SECRET is not set" in out.stderr


def test_the_rotation_command_rotates_every_partition_and_lists_the_kids(backend):
    hmac_secrets.install(backend, SECRET)
    out = _manage(backend, "ffrotatesecret", "k2", "--grace-ms", "60000")
    assert out.returncode == 0, out.stderr
    assert "rotated on 256 partitions" in out.stdout and "previous kids k1" in out.stdout
    assert "current kid: k2" in out.stdout and "k1 accepted until" in out.stdout
    assert {text(backend.client.hget(PartitionKeys(n).hmac_secrets, "current_kid")) for n in range(256)} == {"k2"}
    listed = _manage(backend, "ffrotatesecret", "--list")
    assert "current kid: k2" in listed.stdout
    clash = _manage(backend, "ffrotatesecret", "k2", "--secret-stdin", input="cd" * 32)
    assert clash.returncode != 0 and "already exists with a different secret" in clash.stderr
    bad = _manage(backend, "ffrotatesecret", "k:3")
    assert bad.returncode != 0 and "must be non-empty, without ':'" in bad.stderr
