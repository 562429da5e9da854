"""ffcore's clients name themselves to the server (CLIENT SETINFO) without redis-py reading its package
metadata for every new connection (about half a millisecond of CPU each, paid by every handler thread)."""

from __future__ import annotations

import redis
import redis.utils

from ffcore.connection import make_client


def test_new_connections_report_the_library_without_a_metadata_lookup(valkey_server, monkeypatch):
    looked_up = []
    monkeypatch.setattr(redis.utils, "get_lib_version", lambda: looked_up.append(1) or "0")
    client = make_client(valkey_server.url)
    try:
        conns = [client.connection_pool.get_connection() for _ in range(5)]
        for c in conns:
            c.send_command("CLIENT", "INFO")
            info = c.read_response().decode()
            assert f"lib-ver={redis.__version__}" in info and "lib-name=redis-py" in info
        for c in conns:
            client.connection_pool.release(c)
    finally:
        client.close()
    assert looked_up == []
