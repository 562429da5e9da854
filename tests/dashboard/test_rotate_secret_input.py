"""`ffrotatesecret` takes a chosen secret from a file or stdin, never from argv (issue #37): a secret on the
command line is visible to every user of the machine in `ps` and /proc/<pid>/cmdline."""

from __future__ import annotations

from ffcore.keys import PartitionKeys
from ffcore.reads import text
from ffcore.suspension import hmac_secrets
from tests.dashboard.test_up_hmac import _manage

OLD, CHOSEN = "ab" * 32, "ef" * 32


def _secret_of(backend, kid: str) -> str:
    return text(backend.client.hget(PartitionKeys(0).hmac_secrets, f"secret:{kid}"))


def test_a_secret_on_the_command_line_is_refused_and_never_installed(backend):
    hmac_secrets.install(backend, OLD)
    out = _manage(backend, "ffrotatesecret", "k2", "--secret", CHOSEN)
    assert out.returncode != 0
    assert "--secret-file PATH or --secret-stdin" in out.stderr and "new secret" in out.stderr
    assert _secret_of(backend, "k2") == "" and CHOSEN not in out.stdout + out.stderr


def test_a_chosen_secret_is_read_from_stdin(backend):
    hmac_secrets.install(backend, OLD)
    out = _manage(backend, "ffrotatesecret", "k2", "--secret-stdin", input=CHOSEN + "\n")
    assert out.returncode == 0, out.stderr
    assert _secret_of(backend, "k2") == CHOSEN and CHOSEN not in out.stdout


def test_a_chosen_secret_is_read_from_a_file_and_an_empty_one_is_refused(backend, tmp_path):
    hmac_secrets.install(backend, OLD)
    (tmp_path / "s").write_text(CHOSEN + "\n")
    (tmp_path / "empty").write_text("\n")
    assert _manage(backend, "ffrotatesecret", "k3", "--secret-file", str(tmp_path / "empty")).returncode != 0
    assert _secret_of(backend, "k3") == ""
    out = _manage(backend, "ffrotatesecret", "k3", "--secret-file", str(tmp_path / "s"))
    assert out.returncode == 0, out.stderr
    assert _secret_of(backend, "k3") == CHOSEN
