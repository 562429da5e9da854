"""Issue #20, finding 8: a foreign Host is a 400, bulk job ids cannot name other keys, sign-in is throttled,
and FF_SECURE (or an https trusted origin) turns on secure cookies, HSTS and the proxy's scheme header."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ffcore import keys
from tests.dashboard_fixtures import PASSWORD

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("path", ["/", "/login/", "/v1/executions?partition=0", "/executions/"])
def test_a_disallowed_host_is_answered_400_not_500(client, path):
    r = client.get(path, HTTP_HOST="evil.example")
    assert r.status_code == 400


def test_a_crafted_bulk_job_id_cannot_read_another_bulk_key(viewer_client, dashboard_backend):
    dashboard_backend.client.hset(keys.bulk_job("evil"), mapping={"state": "finished", "action": "cancel",
                                                                 "total": "1", "done": "1"})
    assert viewer_client.get("/executions/bulk/evil/").status_code == 404
    assert viewer_client.get("/executions/bulk/..%2Fevil/").status_code == 404
    assert viewer_client.get("/executions/bulk/6ba7b811-9dad-11d1-80b4-00c04fd430c8/").status_code == 404


def test_sign_in_locks_a_username_after_five_failures_from_one_address(client, operator, viewer):
    for _ in range(5):
        r = client.post("/login/", {"username": "otto", "password": "wrong"})
        assert r.status_code in (400, 429)
    r = client.post("/login/", {"username": "otto", "password": PASSWORD})
    assert r.status_code == 429 and b"Sign-in paused" in r.content
    assert "_auth_user_id" not in client.session
    # Another account from the same address is not locked out by otto's failures.
    r = client.post("/login/", {"username": "vera", "password": PASSWORD})
    assert r.status_code == 302 and client.session["_auth_user_id"] == str(viewer.pk)


def test_a_forwarded_for_header_does_not_escape_the_lock(client, operator):
    for n in range(5):
        client.post("/login/", {"username": "otto", "password": "wrong"}, HTTP_X_FORWARDED_FOR=f"203.0.113.{n}")
    r = client.post("/login/", {"username": "otto", "password": PASSWORD}, HTTP_X_FORWARDED_FOR="198.51.100.7")
    assert r.status_code == 429


def _settings_with(env: dict[str, str]) -> dict[str, object]:
    code = ("import json, django; django.setup(); from django.conf import settings as s; print(json.dumps({n: "
            "getattr(s, n, None) for n in ('SESSION_COOKIE_SECURE', 'CSRF_COOKIE_SECURE', 'SECURE_HSTS_SECONDS', "
            "'SECURE_PROXY_SSL_HEADER', 'CSRF_COOKIE_HTTPONLY')}))")
    base = {k: v for k, v in os.environ.items() if k not in ("FF_SECURE", "CSRF_TRUSTED_ORIGINS")}
    out = subprocess.run([sys.executable, "-c", code], env={**base, "DJANGO_SETTINGS_MODULE": "dashboard.settings",
                                                            "DJANGO_SECRET_KEY": "t", **env},
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_ff_secure_or_an_https_origin_turns_on_secure_cookies_hsts_and_the_proxy_header():
    plain = _settings_with({})
    assert plain["SESSION_COOKIE_SECURE"] is False and plain["SECURE_HSTS_SECONDS"] == 0
    assert plain["SECURE_PROXY_SSL_HEADER"] is None and plain["CSRF_COOKIE_HTTPONLY"] is True
    for env in ({"FF_SECURE": "1"}, {"CSRF_TRUSTED_ORIGINS": "https://ff.example.com"}):
        s = _settings_with(env)
        assert s["SESSION_COOKIE_SECURE"] is True and s["CSRF_COOKIE_SECURE"] is True, env
        assert s["SECURE_HSTS_SECONDS"] == 365 * 86400
        assert s["SECURE_PROXY_SSL_HEADER"] == ["HTTP_X_FORWARDED_PROTO", "https"]
    assert _settings_with({"FF_SECURE": "0", "CSRF_TRUSTED_ORIGINS": "https://x.example"})["SESSION_COOKIE_SECURE"] \
        is False
