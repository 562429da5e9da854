"""`manage.py up`: embedded Valkey (or FF_VALKEY_URL), library, migrations, ASGI server, scanners.

Children are plain subprocesses sharing FF_VALKEY_URL; Ctrl-C / SIGTERM stops them and then the
embedded server, in that order, so the AOF is flushed last.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path

from django.conf import settings
from django.core.management import call_command

from dashboard.demo.ids import LANES as DEMO_LANES
from ffcore import hmac_secrets
from ffcore.backend import Backend
from ffcore.connection import display_url
from ffcore.embedded import EmbeddedValkey
from ffcore.errors import ConfigError


@dataclass
class UpOptions:
    host: str = "127.0.0.1"
    port: int = 8000
    scanners: bool = True
    #: Also run demo workers and the demo workload, and create a demo operator account.
    demo: bool = False
    extra_children: list[list[str]] = field(default_factory=list)


class Up:
    def __init__(self, opts: UpOptions, out: object = sys.stdout) -> None:
        self.opts = opts
        self.out = out
        self.embedded: EmbeddedValkey | None = None
        self.children: list[subprocess.Popen[bytes]] = []
        self.stop_event = threading.Event()

    def say(self, msg: str) -> None:
        print(msg, file=self.out, flush=True)  # type: ignore[call-overload]

    def start_valkey(self) -> str:
        ff = settings.FF_SETTINGS
        if ff.valkey_url:
            return ff.valkey_url
        data = Path(settings.DATA_DIR) / "valkey"
        self.embedded = EmbeddedValkey(data, persistent=True).start()
        self.say(f"embedded Valkey on {self.embedded.url} (data in {data})")
        return self.embedded.url

    def install_hmac_secret(self, backend: Backend) -> str:
        """Install the waitpoint HMAC secret on every partition (never overwriting a stored one).

        FF_WAITPOINT_HMAC_SECRET is required, except on the embedded Valkey, where one is generated once
        and kept under the data dir."""
        secret = settings.FF_SETTINGS.waitpoint_hmac_secret
        explicit = secret is not None
        if secret is None:
            if self.embedded is None:
                raise ConfigError("FF_WAITPOINT_HMAC_SECRET is required with FF_VALKEY_URL: set it to an even-length "
                                  "hex string (e.g. `openssl rand -hex 32`)")
            secret = hmac_secrets.persisted_secret(settings.DATA_DIR)
        report = hmac_secrets.install(backend, secret)
        self.say(f"waitpoint HMAC secret: {report.summary}")
        if report.mismatched and explicit:
            self.say("  the stored secret differs from FF_WAITPOINT_HMAC_SECRET and was kept; rotate it with "
                     "`manage.py ffrotatesecret`")
        return secret

    def run(self) -> int:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: self.stop_event.set())
        try:
            url = self.start_valkey()
            backend = Backend.connect(replace(settings.FF_SETTINGS, valkey_url=url))
            self.say(f"{backend.server} at {display_url(url)} · library flowfabric {backend.build}")
            try:
                secret = self.install_hmac_secret(backend)
            finally:
                backend.close()
            call_command("migrate", interactive=False, verbosity=0)
            env = {**os.environ, "FF_VALKEY_URL": url, "FF_WAITPOINT_HMAC_SECRET": secret}
            manage = str(Path(settings.BASE_DIR) / "manage.py")
            cmds = [[sys.executable, "-m", "daphne", "-b", self.opts.host, "-p", str(self.opts.port),
                     "dashboard.asgi:application"]]
            if self.opts.scanners:
                cmds.append([sys.executable, manage, "ffscanners"])
            if self.opts.demo:
                self.demo_account()
                demo_worker = [sys.executable, manage, "ffworker", "--module", "dashboard.demo.handlers",
                               "--lanes", ",".join(DEMO_LANES), "--concurrency", "6", "--worker-id"]
                cmds += [demo_worker + ["demo-a"], demo_worker + ["demo-b"], [sys.executable, manage, "ffdemo"]]
            cmds += self.opts.extra_children
            for cmd in cmds:
                self.children.append(subprocess.Popen(cmd, env=env, cwd=settings.BASE_DIR))
            self.say(f"dashboard on http://{self.opts.host}:{self.opts.port}/  (Ctrl-C stops everything)")
            while not self.stop_event.wait(0.5):
                dead = [c for c in self.children if c.poll() is not None]
                if dead:
                    self.say(f"a child process exited (code {dead[0].returncode}); stopping")
                    return 1
            return 0
        finally:
            self.shutdown()

    def demo_account(self) -> None:
        """A demo operator account; its password is printed once, when it is created."""
        from django.contrib.auth.models import Group, User

        if User.objects.filter(username="demo").exists():
            self.say("demo operator account: demo (password printed when it was created)")
            return
        password = secrets.token_urlsafe(12)
        user = User.objects.create_user("demo", password=password)
        user.groups.add(Group.objects.get_or_create(name="operator")[0])
        self.say(f"demo operator account created — username: demo  password: {password}  (shown only once)")

    def shutdown(self) -> None:
        for c in self.children:
            if c.poll() is None:
                c.send_signal(signal.SIGTERM)
        for c in self.children:
            try:
                c.wait(timeout=10)
            except subprocess.TimeoutExpired:
                c.kill()
        self.children.clear()
        if self.embedded is not None:
            self.embedded.stop()
            self.embedded = None
