"""Tokenless loopback reads (issue #37): off by default, off behind a reverse proxy on the same host, and a
dashboard server started without a token says so."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ffcore.execution.client import Client
from tests.conftest import REPO

pytestmark = pytest.mark.django_db


@pytest.fixture
def eid(dashboard_backend, monkeypatch) -> str:
    monkeypatch.delenv("FF_API_TOKEN", raising=False)
    return Client(dashboard_backend).create(kind="k").execution_id


def test_a_tokenless_loopback_client_reads_nothing_unless_reads_are_enabled(anon_client, eid, monkeypatch):
    monkeypatch.delenv("FF_LOOPBACK_READS", raising=False)
    assert anon_client.get(f"/v1/executions/{eid}").status_code == 401
    assert anon_client.get("/metrics").status_code == 401
    monkeypatch.setenv("FF_LOOPBACK_READS", "1")
    assert anon_client.get(f"/v1/executions/{eid}").status_code == 200


@pytest.mark.parametrize("header", ["HTTP_X_FORWARDED_FOR", "HTTP_FORWARDED", "HTTP_X_REAL_IP",
                                    "HTTP_X_FORWARDED_HOST"])
def test_a_client_behind_a_reverse_proxy_on_this_host_is_refused_even_with_reads_enabled(anon_client, eid,
                                                                                          monkeypatch, header):
    monkeypatch.setenv("FF_LOOPBACK_READS", "1")
    for path in (f"/v1/executions/{eid}", "/metrics"):
        assert anon_client.get(path, **{header: "203.0.113.9"}).status_code == 401, path


def test_reads_enabled_do_nothing_once_a_token_is_configured(anon_client, eid, monkeypatch):
    monkeypatch.setenv("FF_LOOPBACK_READS", "1")
    monkeypatch.setenv("FF_API_TOKEN", "a-token")
    assert anon_client.get(f"/v1/executions/{eid}").status_code == 401


def _asgi_import_output(**env: str) -> str:
    base = {k: v for k, v in os.environ.items() if not k.startswith("FF_") and k != "DJANGO_SETTINGS_MODULE"}
    out = subprocess.run([sys.executable, "-c", "import dashboard.asgi"], cwd=REPO, capture_output=True, text=True,
                         env={**base, "PYTHONPATH": str(REPO), "DJANGO_SECRET_KEY": "t", **env}, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout + out.stderr


def test_a_dashboard_server_started_without_a_token_warns(tmp_path):
    said = _asgi_import_output(FF_DATA_DIR=str(tmp_path))
    assert "WARNING: FF_API_TOKEN is not set" in said and "FF_LOOPBACK_READS=1 allows" in said
    said = _asgi_import_output(FF_DATA_DIR=str(tmp_path), FF_LOOPBACK_READS="1")
    assert "tokenless loopback reads are ON" in said
    assert "FF_API_TOKEN is not set" not in _asgi_import_output(FF_DATA_DIR=str(tmp_path), FF_API_TOKEN="t")
