"""A real ASGI server (daphne) for live browser tests: websockets need it, pytest-django's live_server is WSGI.

The server process gets its own file SQLite database (migrated, with the `viewer`/`operator` users of
tests.dashboard_fixtures) and the test Valkey. Tests take the session's server as the `asgi_server` fixture
(tests/browser/conftest.py) and sign in with `sign_in(page, asgi_server.url, "vera" or "otto", PASSWORD)`.
`start()` is also what benchmarks/live_tail_latency.py uses.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from ffcore.embedded import free_port

#: The users' password (tests.dashboard_fixtures.PASSWORD; not imported, so benchmarks need no Django).
PASSWORD = "pw-Secret-123"
REPO = Path(__file__).resolve().parents[2]

_USERS = (
    "from django.contrib.auth.models import Group, User\n"
    "for name, group in (('vera', 'viewer'), ('otto', 'operator')):\n"
    "    u = User.objects.create_user(name, password={pw!r})\n"
    "    u.groups.add(Group.objects.get_or_create(name=group)[0])\n"
)


@dataclass
class AsgiServer:
    url: str
    proc: subprocess.Popen[bytes]
    env: dict[str, str]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


#: The migrated database with the two users, made once per process and copied for each server (two Django
#: start-ups per browser module saved).
_TEMPLATE: list[Path] = []


def _database(target: Path, env: dict[str, str]) -> None:
    if not _TEMPLATE:
        first = Path(tempfile.mkdtemp(prefix="ff-asgi-db-")) / "db.sqlite3"
        made = {**env, "DATABASE_URL": f"sqlite:///{first}"}
        manage = [sys.executable, "manage.py"]
        subprocess.run([*manage, "migrate", "--noinput", "-v", "0"], env=made, cwd=REPO, check=True)
        subprocess.run([*manage, "shell", "-c", _USERS.format(pw=PASSWORD)], env=made, cwd=REPO, check=True)
        _TEMPLATE.append(first)
    shutil.copyfile(_TEMPLATE[0], target)


def start(tmp: Path, valkey_url: str) -> AsgiServer:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FF_")}
    env.update({"FF_VALKEY_URL": valkey_url, "DATABASE_URL": f"sqlite:///{tmp / 'db.sqlite3'}",
                "FF_DATA_DIR": str(tmp), "DJANGO_SECRET_KEY": "test-asgi",
                "DJANGO_SETTINGS_MODULE": "dashboard.settings", "ALLOWED_HOSTS": "127.0.0.1,localhost"})
    _database(tmp / "db.sqlite3", env)
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                             "dashboard.asgi:application"], env=env, cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        assert proc.poll() is None, "daphne exited"
        try:
            with urllib.request.urlopen(url + "/login/", timeout=2):
                break
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            if time.monotonic() > deadline:
                proc.kill()
                raise AssertionError("daphne never answered") from None
            time.sleep(0.2)
    return AsgiServer(url, proc, env)

