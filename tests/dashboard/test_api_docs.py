"""The API docs (/api/docs) and schema (/api/openapi.json) need sign-in or the API token, and the docs page
loads Swagger UI from our own static files."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("url", ["/api/docs", "/api/openapi.json"])
def test_anonymous_callers_are_sent_to_sign_in(client, url):
    r = client.get(url)  # the test client is a loopback caller: no exception for it
    assert r.status_code == 302
    assert r["Location"] == f"/login/?next={url}"


@pytest.mark.parametrize("url", ["/api/docs", "/api/openapi.json"])
def test_a_wrong_token_is_refused(client, monkeypatch, url):
    monkeypatch.setenv("FF_API_TOKEN", "right-token")
    assert client.get(url, HTTP_AUTHORIZATION="Bearer wrong-token").status_code == 401


def test_the_api_token_reads_the_schema(client, monkeypatch):
    monkeypatch.setenv("FF_API_TOKEN", "right-token")
    r = client.get("/api/openapi.json", HTTP_AUTHORIZATION="Bearer right-token")
    assert r.status_code == 200
    assert "/v1/executions" in r.json()["paths"]


def test_a_viewer_reads_the_docs_served_from_our_static_files(viewer_client):
    r = viewer_client.get("/api/docs")
    assert r.status_code == 200
    html = r.content.decode()
    assert '<script src="/static/ninja/swagger-ui-bundle.js">' in html
    assert "cdn" not in html.lower() and "https://" not in html
    assert "<script>" not in html  # no inline script: the settings travel in a JSON data block
    assert "default-src 'self'" in r["Content-Security-Policy"]
    schema = viewer_client.get("/api/openapi.json")
    assert schema.status_code == 200
    assert "/v1/executions" in schema.json()["paths"]
