"""Connecting: partition lock, unreachable server, old server version."""

import socket
import threading

import pytest

from ffcore.backend import Backend
from ffcore.connection import ensure_partition_config, make_client
from ffcore.errors import ConfigError, ServerError
from ffcore.partition import PartitionConfig
from ffcore.settings import Settings


def test_partition_counts_are_written_on_first_boot(backend):
    backend.client.delete("ff:config:partitions")
    ensure_partition_config(backend.client, PartitionConfig())
    assert backend.client.hgetall("ff:config:partitions") == {
        b"num_flow_partitions": b"256", b"num_budget_partitions": b"32", b"num_quota_partitions": b"32"}


def test_mismatched_partition_count_is_refused_in_one_line(backend):
    with pytest.raises(ConfigError) as exc:
        Backend.connect(Settings.from_url(backend.url, partitions=PartitionConfig(flow=64)))
    msg = str(exc.value)
    assert "num_flow_partitions: stored '256', configured '64'" in msg
    assert "\n" not in msg


def test_unreachable_url_is_a_clear_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ServerError, match=f"cannot reach Valkey at valkey://127.0.0.1:{port}"):
        Backend.connect(Settings.from_url(f"valkey://127.0.0.1:{port}/0"))


def test_unknown_scheme_is_a_config_error():
    with pytest.raises(ConfigError, match="scheme 'http'"):
        make_client("http://localhost:1")


def _commands(conn: socket.socket):
    """Yield each RESP command (a list of upper-cased first word + args) read from `conn`."""
    f = conn.makefile("rb")
    while True:
        line = f.readline()
        if not line:
            return
        if not line.startswith(b"*"):
            continue
        parts = []
        for _ in range(int(line[1:])):
            size = int(f.readline()[1:])
            parts.append(f.read(size + 2)[:-2])
        yield [parts[0].upper(), *parts[1:]]


def _old_server() -> tuple[int, threading.Event]:
    """A tiny RESP endpoint that claims to be Redis 6.2 (no Valkey Functions)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    stop = threading.Event()

    def handle(conn: socket.socket) -> None:
        with conn:
            for cmd in _commands(conn):
                if cmd[0] == b"PING":
                    conn.sendall(b"+PONG\r\n")
                elif cmd[0] == b"INFO":
                    body = b"# Server\r\nredis_version:6.2.14\r\n"
                    conn.sendall(b"$%d\r\n%s\r\n" % (len(body), body))
                else:
                    conn.sendall(b"+OK\r\n")

    def serve() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            threading.Thread(target=handle, args=(conn,), daemon=True).start()
        srv.close()

    threading.Thread(target=serve, daemon=True).start()
    return srv.getsockname()[1], stop


def test_a_server_older_than_7_2_is_refused():
    port, stop = _old_server()
    try:
        with pytest.raises(ServerError, match=r"redis 6\.2\.14 .* too old; FlowFabric needs Valkey >= 7\.2"):
            Backend.connect(Settings.from_url(f"redis://127.0.0.1:{port}/0"))
    finally:
        stop.set()


def test_a_transport_error_inside_a_pipeline_raises_typed_not_as_a_reply(backend, monkeypatch):
    """A cluster pipeline hands a dropped connection back per command; call_many raises it (the caller's
    transport handling applies) instead of passing it off as a script error reply."""
    import redis

    from ffcore import functions as F
    from ffcore.errors import ScriptError

    def replies(*raws):
        return lambda calls, ahead=None, behind=None: list(raws)

    monkeypatch.setattr(backend, "_pipeline_raw", replies(redis.ConnectionError("reset")))
    with pytest.raises(redis.ConnectionError):
        backend.call_many([F.version()])
    monkeypatch.setattr(backend, "_pipeline_raw", replies(redis.ResponseError("TRYAGAIN")))
    (got,) = backend.call_many([F.version()])
    assert isinstance(got, ScriptError) and got.code == "raised" and "TRYAGAIN" in got.details[0]


def test_a_held_connection_closed_by_the_server_is_replaced_before_the_next_call(backend):
    """The per-thread connection of single FCALLs and pipelines is checked like a pool checkout: a
    socket the server closed (CLIENT KILL here; a restart alike) is replaced, and the call goes through."""
    from ffcore import functions as F

    assert backend.call(F.version()).status  # this thread now holds a connection
    held = backend._direct._conn()
    held.send_command("CLIENT", "ID")
    my_id = int(held.read_response())
    backend.client.client_kill_filter(_id=my_id)
    assert backend.call(F.version()).status
    assert len(backend.call_many([F.version(), F.version()])) == 2
