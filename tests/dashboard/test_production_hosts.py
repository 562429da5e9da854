"""`testserver` (Django's test-client host name) is only in the test settings (issue #37): production
settings refuse a request that names it."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import REPO


def test_production_settings_refuse_the_testserver_host_name(tmp_path):
    code = ("import django; django.setup(); from django.conf import settings; from django.test import Client; "
            "print('testserver' in settings.ALLOWED_HOSTS, Client().get('/login/').status_code)")
    env = {k: v for k, v in os.environ.items() if k not in ("ALLOWED_HOSTS", "DJANGO_SETTINGS_MODULE")}
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60,
                         env={**env, "DJANGO_SETTINGS_MODULE": "dashboard.settings", "DJANGO_SECRET_KEY": "t",
                              "FF_DATA_DIR": str(tmp_path), "PYTHONPATH": str(REPO)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-2:] == ["False", "400"]
