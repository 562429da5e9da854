"""Secret files under the data dir: created 0600 in a 0700 dir, atomically, tightened when found looser."""

from __future__ import annotations

import threading

import pytest

from ffcore import secret_files
from ffcore.errors import ConfigError
from ffcore.suspension import hmac_secrets
from tests.bounded import join


def _mode(path) -> int:
    return path.stat().st_mode & 0o777


def test_a_new_secret_is_written_0600_in_a_0700_dir_and_read_back_unchanged(tmp_path):
    data = tmp_path / "data"
    token, created = secret_files.read_or_create(secret_files.api_token_file(data))
    assert created and len(token) >= 40
    assert _mode(data) == 0o700
    assert _mode(data / "api_token") == 0o600
    assert secret_files.read_or_create(secret_files.api_token_file(data)) == (token, False)
    assert [p.name for p in data.iterdir()] == ["api_token"]  # no temporary file left behind


def test_files_and_dirs_left_open_by_older_versions_are_tightened(tmp_path):
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    data.chmod(0o755)
    key = data / "secret_key"
    key.write_text("kept\n")
    key.chmod(0o644)
    assert secret_files.read_or_create(key) == ("kept", False)
    assert _mode(key) == 0o600
    secret_files.private_dir(data)
    assert _mode(data) == 0o700
    nested = data / "valkey" / "appendonlydir"
    nested.mkdir(parents=True)
    (nested / "ff.aof.1.incr.aof").write_text("")
    (nested / "ff.aof.1.incr.aof").chmod(0o644)
    secret_files.tighten_tree(data / "valkey")
    assert _mode(nested) == 0o700 and _mode(nested / "ff.aof.1.incr.aof") == 0o600


def test_a_private_file_is_created_empty_0600_and_keeps_its_content(tmp_path):
    db = secret_files.private_file(tmp_path / "d" / "db.sqlite3")
    assert db.read_bytes() == b"" and _mode(db) == 0o600 and _mode(tmp_path / "d") == 0o700
    db.write_bytes(b"SQLite format 3\x00")
    db.chmod(0o644)
    secret_files.private_file(db)
    assert db.read_bytes() == b"SQLite format 3\x00" and _mode(db) == 0o600


def test_an_empty_secret_file_is_refused_rather_than_used(tmp_path):
    (tmp_path / "valkey_password").write_text("\n")
    with pytest.raises(ConfigError, match="is empty"):
        secret_files.read_or_create(secret_files.valkey_password_file(tmp_path))


def test_processes_creating_the_same_secret_at_once_all_get_the_one_that_was_kept(tmp_path):
    path = tmp_path / "secret_key"
    results: list[secret_files.Secret] = []
    barrier = threading.Barrier(8)

    def create(i: int) -> None:
        barrier.wait()
        results.append(secret_files.read_or_create(path, lambda: f"value-{i}"))

    threads = [threading.Thread(target=create, args=(i,), daemon=True) for i in range(8)]
    for t in threads:
        t.start()
    join(threads)
    kept = path.read_text().strip()
    assert {r.value for r in results} == {kept}
    assert sum(r.created for r in results) == 1


def test_the_waitpoint_hmac_secret_is_persisted_through_the_same_rule(tmp_path):
    data = tmp_path / "data"
    secret = hmac_secrets.persisted_secret(data)
    assert hmac_secrets.validate_secret(secret) == secret
    assert _mode(data) == 0o700 and _mode(data / hmac_secrets.SECRET_FILE) == 0o600
    assert hmac_secrets.persisted_secret(data) == secret
