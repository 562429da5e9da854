"""The dashboard inside an existing Django project (docs/embedding.md): host_settings.py mounts it under
/ff/ next to the host's own pages; host_checks.py signs in and reads pages there, in a process of its own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_dashboard_works_mounted_under_a_prefix_in_a_host_project() -> None:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE" and not k.startswith("FF_")}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--ds", "tests.embedding.host_settings",
         "tests/embedding/host_checks.py"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "5 passed" in done.stdout, done.stdout
