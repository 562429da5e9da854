"""Every REST operation in the OpenAPI, with a token configured: an anonymous client gets 401, a viewer's
session may read but gets 403 on every write, and even the real token from another origin gets 403 — and the
whole walk writes nothing. New routes are walked without being listed here."""

from __future__ import annotations

import json
import re

import pytest
from django.test import Client as DjangoClient

from dashboard.api.main import api
from tests.api.conftest import API_TOKEN
from tests.keyspace import MISSING_EID, MISSING_UUID, changed, keyspace

pytestmark = pytest.mark.django_db

WRITES = {"post", "put", "patch", "delete"}
SAMPLES = {"schedule_id": "sch-1-0123456789abcdef", "attempt_index": "0", "worker_id": "w1", "lane": "default"}


def _value(name: str) -> str:
    if name in SAMPLES:
        return SAMPLES[name]
    return MISSING_EID if name in ("execution_id", "eid") else MISSING_UUID


def operations() -> list[tuple[str, str]]:
    paths = api.get_openapi_schema()["paths"]
    return sorted((method, re.sub(r"\{(\w+)\}", lambda m: _value(m.group(1)), path))
                  for path, ops in paths.items() for method in ops if method in WRITES | {"get"})


def _call(c: DjangoClient, method: str, path: str, **extra: str):
    if method == "get":
        return c.get(path, **extra)
    return getattr(c, method)(path, json.dumps({"reason": "walk"}), content_type="application/json", **extra)


def test_the_walk_covers_the_api():
    ops = operations()
    assert len(ops) >= 50 and any(m == "post" and "/schedules" in p for m, p in ops)


def walk(who: str, viewer: object, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every operation as `who` ("anonymous", a "viewer"'s session, the real token from an "other-origin"), a token
    configured: the operations whose answer was not the door's (also used on an upstream deployment)."""
    monkeypatch.setenv("FF_API_TOKEN", API_TOKEN)
    c = DjangoClient()
    extra: dict[str, str] = {}
    if who == "viewer":
        c.force_login(viewer)
    elif who == "other-origin":
        extra = {"HTTP_AUTHORIZATION": f"Bearer {API_TOKEN}", "HTTP_ORIGIN": "https://evil.example"}
    wrong = []
    for method, path in operations():
        r = _call(c, method, path, **extra)
        if who == "anonymous":
            ok = r.status_code == 401
        elif who == "other-origin" or method in WRITES or path.endswith("/token"):
            ok = r.status_code == 403  # another origin gets nothing; a viewer never writes nor sees a raw token
        else:  # and reads the rest (the ids name nothing: 404 or 400)
            ok = r.status_code not in (401, 403, 500)
        if not ok:
            wrong.append(f"{method.upper()} {path}: {r.status_code}")
    return wrong


@pytest.mark.parametrize("who", ["anonymous", "viewer", "other-origin"])
def test_every_operation_refuses_anonymous_clients_viewers_writing_and_other_origins(who, viewer, monkeypatch,
                                                                                   dashboard_backend):
    before = keyspace(dashboard_backend)
    assert walk(who, viewer, monkeypatch) == []
    assert changed(before, keyspace(dashboard_backend)) == []
