"""Restarts: clients reconnect after a Valkey restart and reload the library when it is gone."""

from __future__ import annotations

import time

from ffcore.backend import Backend
from ffcore.embedded import EmbeddedValkey
from ffcore.execution.client import Client
from ffcore.settings import Settings
from ffcore.worker.worker import Registry, Worker, WorkerConfig


def test_an_empty_restarted_server_gets_the_library_back_on_the_next_call(tmp_path):
    server = EmbeddedValkey(tmp_path / "a", persistent=False).start()
    try:
        backend = Backend.connect(Settings.from_url(server.url))
        c = Client(backend)
        c.create(kind="k")
        server.stop()
        server = EmbeddedValkey(tmp_path / "a", persistent=False, port=server.port).start()
        # Same client objects: the connection pool reconnects and the FCALL self-heals the library.
        eid = c.create(kind="k").execution_id
        assert c.get_state(eid) == "waiting"
        assert backend.client.fcall("ff_version", 0) == b"6"
    finally:
        server.stop()


def test_a_persistent_server_restart_keeps_work_and_workers_carry_on(tmp_path):
    server = EmbeddedValkey(tmp_path / "b", persistent=True).start()
    try:
        backend = Backend.connect(Settings.from_url(server.url))
        c = Client(backend)
        eids = [r.execution_id for r in c.create_many([{"kind": "k"} for _ in range(20)])]
        backend.client.execute_command("BGREWRITEAOF")
        time.sleep(0.5)
        reg = Registry()
        reg.handler("k")(lambda task: b"ok")
        w = Worker(backend, WorkerConfig(concurrency=4), reg)
        for t in w.claim_next(4):
            t.complete(b"ok")
        server.stop()  # SHUTDOWN flushes the AOF
        server = EmbeddedValkey(tmp_path / "b", persistent=True, port=server.port).start()
        for _ in range(20):
            for t in w.claim_next(4):
                t.complete(b"ok")
        assert {c.get_state(e) for e in eids} == {"completed"}
        assert all(c.get_result(e) == b"ok" for e in eids)
    finally:
        server.stop()
