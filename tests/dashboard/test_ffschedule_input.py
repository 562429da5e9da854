"""`manage.py ffschedule add` input (#36 Why-4): `--every` in words ("5 minutes"), nan / inf / "²" refused in one
clear line (no traceback), ASCII-only catch-up and priority, every bad option named at once; pause or resume that
would change nothing is refused and not audited."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest
from django.core.management import CommandError, call_command

from ffcore import audit
from ffcore.execution.client import Client
from tests.conftest import REPO
from tests.keyspace import keyspace


def _run(*args: str) -> str:
    out = io.StringIO()
    call_command("ffschedule", *args, stdout=out)
    return out.getvalue()


def _written(backend):
    return {k: v for k, v in keyspace(backend).items() if k != b"ff:audit"}


@pytest.mark.parametrize("every, words", [("5 minutes", "Every 5 min"), ("2 h", "Every 2 h"), ("30s", "Every 30 s"),
                                          ("every 90 seconds", "Every 90 s"), ("10", "Every 10 s")])
def test_every_takes_the_interval_in_words(dashboard_backend, every, words):
    said = _run("add", "beat", "--every", every, "--kind", "k", "--reason", "r")
    assert f"beat: {words};" in said


@pytest.mark.parametrize(("args", "message"), [
    (("--every", "nan"), "invalid spec.interval_ms: not an interval: 'nan'"),
    (("--every", "inf"), "invalid spec.interval_ms: not an interval: 'inf'"),
    (("--every", "5", "--catchup", "²"), "invalid catchup: must be \"skip\" or a whole number"),
    (("--every", "5", "--catchup", "١٢"), "invalid catchup"),
])
def test_bad_numbers_are_refused_in_words_and_write_nothing(dashboard_backend, args, message):
    before = _written(dashboard_backend)
    with pytest.raises(CommandError, match=message):
        _run("add", "x", "--kind", "k", "--reason", "r", *args)
    assert _written(dashboard_backend) == before


def test_a_name_ending_in_a_newline_is_refused(dashboard_backend):
    with pytest.raises(CommandError, match="invalid name"):
        _run("add", "nightly\n", "--every", "5", "--kind", "k", "--reason", "r")
    assert Client(dashboard_backend).schedules.list() == []


def test_every_bad_option_is_named_in_one_answer(dashboard_backend):
    with pytest.raises(CommandError) as e:
        _run("add", "x\n", "--every", "nan", "--kind", "k", "--catchup", "²", "--overlap", "never", "--reason", "r")
    for field in ("spec.interval_ms", "name", "catchup", "overlap"):
        assert f"invalid {field}:" in str(e.value)


def test_a_non_ascii_priority_is_refused_by_the_parser(dashboard_backend):
    with pytest.raises(CommandError, match="is not a whole number"):
        _run("add", "x", "--every", "5", "--kind", "k", "--priority", "١٢", "--reason", "r")


def test_pausing_a_paused_schedule_is_refused_and_not_audited(dashboard_backend):
    _run("add", "tick", "--every", "10", "--kind", "k", "--reason", "r", "--paused")
    with pytest.raises(CommandError, match="already paused"):
        _run("pause", "tick", "--reason", "again")
    _run("add", "tock", "--every", "10", "--kind", "k", "--reason", "r")
    with pytest.raises(CommandError, match="already active"):
        _run("resume", "tock", "--reason", "x")
    assert [e.action for e in audit.recent(dashboard_backend, count=10)] == ["schedule_add", "schedule_add"]


def test_the_real_command_answers_nan_with_one_line_and_no_traceback(dashboard_backend, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("FF_")}
    env.update({"FF_VALKEY_URL": dashboard_backend.url, "FF_DATA_DIR": str(tmp_path), "DJANGO_SECRET_KEY": "test",
                "PYTHONPATH": str(REPO)})
    out = subprocess.run([sys.executable, "manage.py", "ffschedule", "add", "x", "--every", "nan", "--kind", "k",
                          "--catchup", "²", "--reason", "r"], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode != 0
    assert "Traceback" not in out.stderr
    assert "invalid spec.interval_ms" in out.stderr and "invalid catchup" in out.stderr
