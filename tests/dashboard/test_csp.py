"""Every page carries the Content-Security-Policy, and no page of ours needs an inline script or style."""

from __future__ import annotations

import pytest
from django.test import Client as DjangoClient

pytestmark = pytest.mark.django_db

POLICY = ("default-src 'self'", "script-src 'self'", "style-src 'self'", "img-src 'self' data:",
          "connect-src 'self'", "frame-ancestors 'none'", "base-uri 'self'", "form-action 'self'",
          "object-src 'none'")


@pytest.mark.parametrize("url", ["/", "/executions/", "/workers/", "/audit/", "/system/", "/flows/", "/waitpoints/",
                                 "/budgets/", "/quotas/", "/api/docs", "/no-such-page/"])
def test_every_page_carries_the_policy_and_no_inline_script_or_style(viewer_client, seed, url):
    r = viewer_client.get(url)
    assert r.status_code in (200, 404)
    assert sorted(r["Content-Security-Policy"].split("; ")) == sorted(POLICY)
    html = r.content.decode()
    assert "<script>" not in html and "<style" not in html and " style=" not in html


def test_the_sign_in_page_and_its_redirect_carry_the_policy(client):
    assert "default-src 'self'" in client.get("/login/")["Content-Security-Policy"]
    assert "default-src 'self'" in client.get("/")["Content-Security-Policy"]


def test_a_csrf_failure_is_explained_without_an_inline_style(viewer, seed):
    c = DjangoClient(enforce_csrf_checks=True)
    c.force_login(viewer)
    r = c.post(f"/executions/{seed.waiting}/cancel", {"cancel-reason": "no token"})
    assert r.status_code == 403
    html = r.content.decode()
    assert 'data-code="csrf_failed"' in html and "<style" not in html
    assert "default-src 'self'" in r["Content-Security-Policy"]
