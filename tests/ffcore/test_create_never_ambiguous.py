"""A create whose connection breaks after it was sent is never ambiguous (issue #41 item 2): the ids are minted
on the client, so the create is sent again and a create that had run answers DUPLICATE with our own id — the
caller sees its execution created once, or ClusterUnavailable, never a "may have run" ConnectionError.

The break is real: a loopback proxy in front of the test's Valkey forwards the FCALLs and then cuts both
sockets at the first byte of the reply, so the server ran the command and the client never heard back."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

import pytest

from ffcore import failover
from ffcore.backend import Backend
from ffcore.execution.client import Client
from ffcore.keys import ExecKeys, PartitionKeys
from ffcore.settings import Settings


class ReplyCutter:
    """A TCP proxy; the first `cuts` connections that send an FCALL are closed when the reply starts."""

    def __init__(self, target_port: int, cuts: int) -> None:
        self.target_port = target_port
        self.cuts = cuts
        self.cut = 0
        self.down = False  # refuse every new connection (a node that is gone)
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            if self.down:
                conn.close()
                continue
            up = socket.create_connection(("127.0.0.1", self.target_port))
            armed = threading.Event()
            threading.Thread(target=self._up, args=(conn, up, armed), daemon=True).start()
            threading.Thread(target=self._down, args=(up, conn, armed), daemon=True).start()

    def _up(self, src: socket.socket, dst: socket.socket, armed: threading.Event) -> None:
        try:
            while data := src.recv(65536):
                if b"FCALL" in data.upper():
                    with self._lock:
                        if self.cut < self.cuts:
                            self.cut += 1
                            armed.set()
                dst.sendall(data)
        except OSError:
            pass

    def _down(self, src: socket.socket, dst: socket.socket, armed: threading.Event) -> None:
        try:
            while data := src.recv(65536):
                if armed.is_set():  # the server ran it; the client never hears back
                    break
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def close(self) -> None:
        self._listener.close()


@pytest.fixture
def cutter(backend: Backend, valkey_server) -> Iterator[ReplyCutter]:
    proxy = ReplyCutter(valkey_server.port, cuts=0)
    yield proxy
    proxy.close()


def _client_through(proxy: ReplyCutter, cuts: int = 0) -> Client:
    """A client through the proxy, which cuts the replies of the next `cuts` FCALLs (connecting's read-only
    library probe goes through whole)."""
    proxy.cuts = 0
    client = Client(Backend.connect(Settings.from_url(f"valkey://127.0.0.1:{proxy.port}/0"), load=False))
    proxy.cuts = cuts
    return client


def _stored(backend: Backend) -> set[str]:
    out: set[str] = set()
    for n in range(backend.settings.partitions.flow):
        out |= {m.decode() for m in backend.client.zrange(PartitionKeys(n).created, 0, -1)}
    return out


@pytest.mark.parametrize("cuts", [1, 6], ids=["one cut (redis-py resends)", "more cuts than redis-py retries"])
def test_a_plain_create_whose_reply_was_lost_is_created_once(backend, cutter, cuts):
    client = _client_through(cutter, cuts)
    result = client.create(kind="k", lane="default", payload=b"x")
    assert cutter.cut == cuts  # the replies really were cut
    assert not result.duplicate and result.public_state == "waiting"
    assert _stored(backend) == {str(result.execution_id)}
    assert backend.client.hget(ExecKeys(result.execution_id).core, "public_state") == b"waiting"


def test_create_many_whose_reply_was_lost_is_created_once_each(backend, cutter):
    client = _client_through(cutter, 5)
    results = client.create_many([{"kind": "k", "lane": "default", "payload": b"x"} for _ in range(20)])
    assert cutter.cut == 5
    assert all(not r.duplicate and r.public_state == "waiting" for r in results)
    assert _stored(backend) == {str(r.execution_id) for r in results} and len(results) == 20


def test_a_delayed_create_whose_reply_was_lost_is_created_once_and_indexed(backend, cutter):
    client = _client_through(cutter, 6)
    result = client.create(kind="k", lane="default", delay_until=backend.now_ms() + 60_000)
    assert cutter.cut == 6
    assert not result.duplicate and result.public_state == "delayed"
    assert _stored(backend) == {str(result.execution_id)}  # the listing index written after the resend


def test_an_idempotency_keyed_create_still_reports_a_true_duplicate(backend, cutter):
    client = _client_through(cutter)
    first = client.create(kind="k", lane="default", idempotency_key="order-7")
    again = client.create(kind="k", lane="default", idempotency_key="order-7")
    assert not first.duplicate and again.duplicate and again.execution_id == first.execution_id


def test_a_node_gone_for_the_whole_window_is_cluster_unavailable_not_ambiguous(backend, cutter, monkeypatch):
    monkeypatch.setattr(failover, "FAILOVER_WINDOW_S", 0.6)
    client = _client_through(cutter)
    client.create(kind="k", lane="default")  # connected
    cutter.down, cutter.cuts = True, 100
    with pytest.raises(failover.ClusterUnavailable):
        client.create(kind="k", lane="default")
