"""`manage.py up`: embedded Valkey (or FF_VALKEY_URL), library, migrations, ASGI server, scanners.

Children are plain subprocesses sharing FF_VALKEY_URL (with the embedded server's password); only the
dashboard gets FF_API_TOKEN (generated once under the data dir when not given); Ctrl-C / SIGTERM stops them and then the
embedded server, in that order, so the AOF is flushed last.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import secrets
import signal
import stat
import subprocess
import sys
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path

from django.conf import settings
from django.core.management import call_command

from dashboard.demo.ids import LANES as DEMO_LANES
from ffcore import secret_files
from ffcore.backend import Backend
from ffcore.connection import display_url
from ffcore.embedded import EmbeddedValkey
from ffcore.errors import ConfigError
from ffcore.suspension import hmac_secrets

#: Secrets `up` holds that its children do not inherit (the dashboard gets the API token back explicitly).
CHILD_SECRETS = ("FF_API_TOKEN", "FF_WAITPOINT_HMAC_SECRET")


def private_log(path: Path) -> None:
    """Create a log file mode 0600 before daphne opens it (a new directory for it 0700); an existing
    regular file of ours is tightened. A directory the user chose and already has is left as it is."""
    if not path.parent.exists():
        secret_files.private_dir(path.parent)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, secret_files.FILE_MODE))
    st = path.stat()
    if stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid() and st.st_mode & 0o077:
        path.chmod(secret_files.FILE_MODE)


@dataclass
class UpOptions:
    host: str = "127.0.0.1"
    port: int = 8000
    scanners: bool = True
    #: Replace a flowfabric library that is not ours (FF_REPLACE_LIBRARY for the children too).
    replace_library: bool = False
    #: Also run demo workers and the demo workload, and create a demo operator account.
    demo: bool = False
    extra_children: list[list[str]] = field(default_factory=list)
    #: Where the HTTP access log goes: None = a file under the data dir, "-" = this terminal, else a path.
    access_log: str | None = None


#: Host names that never leave the machine; Django's test client's `testserver` is no network name at all.
_LOCAL_NAMES = {"localhost", "testserver"}


def is_loopback(host: str) -> bool:
    """Whether `host` (an --host address or an ALLOWED_HOSTS entry) only reaches this machine."""
    name = host.strip().lower().removeprefix("[").removesuffix("]")
    if name in _LOCAL_NAMES or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False  # a DNS name, "*", "0.0.0.0"-like wildcards are not addresses we can vouch for


class Up:
    def __init__(self, opts: UpOptions, out: object = sys.stdout) -> None:
        self.opts = opts
        self.out = out
        self.embedded: EmbeddedValkey | None = None
        self.children: list[subprocess.Popen[bytes]] = []
        self.stop_event = threading.Event()

    def say(self, msg: str) -> None:
        # One write with its newline: Django's OutputWrapper would add a second one to a bare print's "\n".
        self.out.write(msg + "\n")  # type: ignore[attr-defined]
        self.out.flush()  # type: ignore[attr-defined]

    def start_valkey(self) -> str:
        ff = settings.FF_SETTINGS
        if ff.valkey_url:
            return ff.valkey_url
        self.embedded = EmbeddedValkey.for_data_dir(settings.DATA_DIR).start()
        self.say(f"embedded Valkey on {display_url(self.embedded.url)} (data in {self.embedded.data_dir}, "
                 f"password in {secret_files.valkey_password_file(settings.DATA_DIR)})")
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
        where = "FF_WAITPOINT_HMAC_SECRET" if explicit else str(Path(settings.DATA_DIR) / hmac_secrets.SECRET_FILE)
        n = backend.settings.partitions.flow
        state = f"ready on all {n} partitions" if report.installed + report.repaired + report.matched == n \
            else report.summary
        self.say(f"signing key for waitpoint signal tokens: {state} (from {where})")
        if report.mismatched and explicit:
            self.say("  the stored secret differs from FF_WAITPOINT_HMAC_SECRET and was kept; rotate it with "
                     "`manage.py ffrotatesecret`")
        return secret

    def api_token(self) -> str:
        """FF_API_TOKEN, or the token kept under the data dir (generated and printed once, on first start)."""
        given = os.environ.get("FF_API_TOKEN", "").strip()
        if given:
            return given
        path = secret_files.api_token_file(settings.DATA_DIR)
        token, created = secret_files.read_or_create(path)
        if created:
            self.say(f"API token created — {token}  stored in {path}  (shown only once; "
                     "send it as `Authorization: Bearer <token>`)")
        else:
            self.say(f"API token: in {path} (FF_API_TOKEN not set)")
        # This process serves nothing, but whatever it runs in-process sees the same token as its children.
        os.environ["FF_API_TOKEN"] = token
        return token

    def exposure_warning(self) -> str | None:
        """A warning when the dashboard is reachable beyond this machine and no FF_API_TOKEN was given."""
        if os.environ.get("FF_API_TOKEN", "").strip():
            return None
        exposed = [h for h in [self.opts.host, *settings.ALLOWED_HOSTS] if not is_loopback(h)]
        if not exposed:
            return None
        return (f"WARNING: the dashboard is reachable beyond this machine ({', '.join(dict.fromkeys(exposed))}) and "
                "FF_API_TOKEN is not set. The generated API token still protects API writes; set FF_API_TOKEN "
                "yourself, and DJANGO_SECRET_KEY, for a deployment (docs/deployment.md).")

    def access_log_path(self) -> str:
        """daphne's --access-log: the terminal ("-") only when asked; a file under the data dir by default."""
        if self.opts.access_log:
            if self.opts.access_log != "-":
                private_log(Path(self.opts.access_log))
            return self.opts.access_log
        logs = secret_files.private_dir(Path(settings.DATA_DIR) / "logs")
        return str(secret_files.private_file(logs / "access.log"))

    def banner(self, login: str, access_log: str) -> None:
        url = f"http://{self.opts.host}:{self.opts.port}/"
        self.say(f"dashboard on {url}  (Ctrl-C stops everything)")
        self.say(f"  sign in     {login}")
        self.say(f"  data dir    {settings.DATA_DIR}")
        self.say("  access log  " + ("this terminal" if access_log == "-" else
                                     f"{access_log}  (`up --access-log` shows it here)"))

    def run(self) -> int:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: self.stop_event.set())
        try:
            url = self.start_valkey()
            replace_library = self.opts.replace_library or settings.FF_SETTINGS.replace_library
            backend = Backend.connect(replace(settings.FF_SETTINGS, valkey_url=url, replace_library=replace_library))
            mode = backend.upstream
            try:
                if mode is not None:
                    # Upstream's deployment owns its library, its HMAC secrets and its scanners: touch none.
                    self.say(f"{backend.server} at {display_url(url)} · operating {mode.label} — upstream mode: "
                             "its library, secrets and scanners are left as they are (docs/upstream.md)")
                else:
                    self.say(f"{backend.server} at {display_url(url)} · library flowfabric {backend.build}")
                    self.install_hmac_secret(backend)
            finally:
                backend.close()
            call_command("migrate", interactive=False, verbosity=0)
            warning = self.exposure_warning()  # before api_token() sets FF_API_TOKEN
            token = self.api_token()
            if warning:
                self.say(warning)
            # Each child gets only the secrets it needs (handler code runs in the workers): the HMAC secret is
            # installed in Valkey above, so no child needs it; only the dashboard checks the API token.
            env = {k: v for k, v in os.environ.items() if k not in CHILD_SECRETS}
            env.update({"FF_VALKEY_URL": url, "FF_REPLACE_LIBRARY": "1" if replace_library else "0"})
            # A quiet terminal: the children log warnings and errors (FF_LOG_LEVEL=INFO shows every task failure).
            env.setdefault("FF_LOG_LEVEL", "WARNING")
            access_log = self.access_log_path()
            # `python -m django` with this process's settings module and data dir: works from a checkout and
            # from an installed wheel (no manage.py; the children must not resolve `var/` in site-packages).
            env.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
            env["FF_DATA_DIR"] = str(settings.DATA_DIR)
            django = [sys.executable, "-m", "django"]
            checkout = (Path(settings.BASE_DIR) / "manage.py").exists()
            cmds = [[sys.executable, "-m", "daphne", "-b", self.opts.host, "-p", str(self.opts.port), "-v", "0",
                     "--access-log", access_log, "dashboard.asgi:application"]]
            if self.opts.scanners and mode is None:
                cmds.append([*django, "ffscanners"])
            elif self.opts.scanners:  # upstream runs its own scanners: only our ff:up: indexes are kept (ffupindex)
                cmds.append([*django, "ffupindex"])
            login = "a Django user (create one with `python manage.py createsuperuser`)"
            if self.opts.demo and mode is None:
                login = self.demo_account()
                demo_worker = [*django, "ffworker", "--module", "dashboard.demo.handlers",
                               "--lanes", ",".join(DEMO_LANES), "--concurrency", "6", "--worker-id"]
                cmds += [demo_worker + ["demo-a"], demo_worker + ["demo-b"], [*django, "ffdemo"]]
            cmds += self.opts.extra_children
            for n, cmd in enumerate(cmds):
                child_env = {**env, "FF_API_TOKEN": token} if n == 0 else env  # cmds[0] is the dashboard
                self.children.append(subprocess.Popen(cmd, env=child_env,
                                                      cwd=settings.BASE_DIR if checkout else None))
            self.banner(login, access_log)
            while not self.stop_event.wait(0.5):
                dead = [c for c in self.children if c.poll() is not None]
                if dead:
                    self.say(f"a child process exited (code {dead[0].returncode}); stopping")
                    return 1
            return 0
        finally:
            self.shutdown()

    def demo_account(self) -> str:
        """A demo operator account; its password is printed once, when it is created. Returns the banner's
        sign-in line."""
        from django.contrib.auth.models import Group, User

        if User.objects.filter(username="demo").exists():
            return "demo  (operator; its password was printed when it was created)"
        password = secrets.token_urlsafe(12)
        user = User.objects.create_user("demo", password=password)
        user.groups.add(Group.objects.get_or_create(name="operator")[0])
        self.say(f"demo operator account created — username: demo  password: {password}  (shown only once)")
        return "demo  (operator; the password is printed above, once)"

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
