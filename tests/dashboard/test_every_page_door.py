"""Every form route of the pages (read from the URL conf, so new ones are walked without being listed): an
anonymous client is sent to sign in, a viewer gets 403, an operator's browser posting from another origin
gets 403 (CSRF) — and nothing is written. Sign-in, sign-out and the theme choice (a cookie) are not writes."""

from __future__ import annotations

import pytest
from django.test import Client as DjangoClient

from tests.dashboard.form_routes import AUTH_FORMS, FORMS, page_patterns, sample_path
from tests.keyspace import changed, keyspace

pytestmark = pytest.mark.django_db

NOT_WRITES = set(AUTH_FORMS) | {"theme", "view_save", "view_delete"}


def _writes() -> list[str]:
    return sorted(sample_path(p) for p in page_patterns() if p.name in FORMS and p.name not in NOT_WRITES)


def walk(who: str, viewer: object, operator: object, more: list[str] | None = None) -> list[str]:
    """Every form route (and `more` paths) posted as `who` ("anonymous", a "viewer", an operator's browser on an
    "other-origin"): the paths whose answer was not the door's (also used on an upstream deployment)."""
    paths = [*_writes(), *(more or [])]
    assert len(paths) >= 15
    c = DjangoClient(enforce_csrf_checks=who == "other-origin")
    if who == "viewer":
        c.force_login(viewer)
    elif who == "other-origin":
        c.force_login(operator)
    wrong = []
    for path in paths:
        r = c.post(path, {"reason": "walk"}, HTTP_ORIGIN="https://evil.example") if who == "other-origin" \
            else c.post(path, {"reason": "walk"})
        refused = (r.status_code == 302 and "/login/" in r["Location"]) if who == "anonymous" \
            else r.status_code == 403
        if not refused:
            wrong.append(f"{path}: {r.status_code}")
    return wrong


@pytest.mark.parametrize("who", ["anonymous", "viewer", "other-origin"])
def test_no_form_route_lets_anonymous_viewers_or_other_origins_write(who, viewer, operator, dashboard_backend):
    before = keyspace(dashboard_backend)
    assert walk(who, viewer, operator) == []
    assert changed(before, keyspace(dashboard_backend)) == []
