"""Dashboard fixtures (imported by the dashboard and browser conftests): users per role, a seeded dataset."""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest
from django.contrib.auth.models import Group, User

from ffcore.backend import Backend
from ffcore.execution.client import Client
from ffcore.policy import Policy
from ffcore.worker.worker import Worker, WorkerConfig

PASSWORD = "pw-Secret-123"


@pytest.fixture
def viewer(db) -> User:
    u = User.objects.create_user("vera", password=PASSWORD)
    u.groups.add(Group.objects.get_or_create(name="viewer")[0])
    return u


@pytest.fixture
def operator(db) -> User:
    u = User.objects.create_user("otto", password=PASSWORD)
    u.groups.add(Group.objects.get_or_create(name="operator")[0])
    return u


@pytest.fixture
def viewer_client(client, viewer):
    client.force_login(viewer)
    return client


@pytest.fixture
def operator_client(client, operator):
    client.force_login(operator)
    return client


@dataclass
class Seed:
    waiting: str
    active: str
    completed: str
    failed: str
    xss: str
    binary: str
    worker: Worker


@pytest.fixture
def seed(dashboard_backend: Backend) -> Seed:
    c = Client(dashboard_backend)
    real_create = c.create

    def create(**kw):  # distinct creation milliseconds keep "newest first" deterministic
        time.sleep(0.003)
        return real_create(**kw)

    c.create = create  # type: ignore[method-assign]
    xss = c.create(kind="xss", lane="default", payload="<script>alert(1)</script>").execution_id
    binary = c.create(kind="bin", lane="default", payload=bytes(range(256))).execution_id
    done = c.create(kind="report", lane="default", payload=b'{"user": "ann", "n": [1, 2]}',
                    tags={"team": "blue"}).execution_id
    bad = c.create(kind="report", lane="default", payload=b"{}", policy=Policy()).execution_id
    act = c.create(kind="long", lane="gpu", payload=b"{}").execution_id
    w = Worker(dashboard_backend, WorkerConfig(lanes=("default", "gpu"), worker_id="w-test", concurrency=8))
    w.heartbeat.register()
    tasks = {t.execution_id: t for t in w.claim_next(8)}
    tasks[done].complete(b'{"ok": true}')
    tasks[bad].fail("ValueError: boom", "ValueError")
    for eid in (xss, binary):
        tasks[eid].release()
    waiting = c.create(kind="report", lane="default", payload=b"{}", priority=5).execution_id
    w.heartbeat.beat([act])
    return Seed(waiting, act, done, bad, xss, binary, w)
