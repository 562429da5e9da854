"""Checks run inside the host project of host_settings.py (the dashboard mounted under /ff/), by
test_embedding.py in a pytest process of its own (Django's settings are chosen once per process):

    python -m pytest tests/embedding/host_checks.py --ds tests.embedding.host_settings
"""

from __future__ import annotations

import asyncio

import pytest
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import Group, User

from tests.bounded import arun

pytestmark = pytest.mark.django_db(transaction=True)

PASSWORD = "pw-Host-123"


@pytest.fixture
def viewer(db) -> User:
    u = User.objects.create_user("hedda", password=PASSWORD)
    u.groups.add(Group.objects.get_or_create(name="viewer")[0])
    return u


def test_the_host_keeps_its_own_pages(client):
    assert client.get("/").content == b"the host project's own home page"
    assert client.get("/admin/login/").status_code == 200


def test_the_dashboard_asks_for_sign_in_under_its_prefix(client, dashboard_backend):
    r = client.get("/ff/executions/")
    assert r.status_code == 302
    assert r["Location"] == "/ff/login/?next=/ff/executions/"


def test_the_sign_in_page_renders_with_the_dashboard_s_assets(client):
    html = client.get("/ff/login/").content.decode()
    assert '<form method="post"' in html and 'name="username"' in html and 'name="password"' in html
    assert '"/static/dashboard/app.css"' in html and '"/static/vendor/htmx-2.0.11.min.js"' in html
    assert 'data-ws-root="/ff/ws/"' in html


def test_a_viewer_signs_in_and_reads_the_executions_page(client, viewer, dashboard_backend):
    r = client.post("/ff/login/", {"username": "hedda", "password": PASSWORD, "next": "/ff/executions/"})
    assert (r.status_code, r["Location"]) == (302, "/ff/executions/")
    r = client.get("/ff/executions/")
    html = r.content.decode()
    assert r.status_code == 200
    assert 'href="/ff/flows/"' in html and 'action="/ff/logout/"' in html
    assert "hedda · viewer" in html
    assert client.get("/ff/healthz").status_code == 200
    docs = client.get("/ff/api/docs")
    assert docs.status_code == 200 and "/ff/api/openapi.json" in docs.content.decode()


def test_the_live_socket_answers_under_the_prefix(client, viewer, dashboard_backend):
    from dashboard import live
    from tests.embedding.host_asgi import application

    client.force_login(viewer)
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()

    async def connect() -> bool:
        comm = WebsocketCommunicator(application, "/ff/ws/live/?topics=overview",
                                     headers=[(b"host", b"testserver"), (b"origin", b"http://testserver"),
                                              (b"cookie", cookie)])
        try:
            connected, _ = await comm.connect()
            await asyncio.wait_for(live.hub().ready.wait(), 5)  # the page's relay is subscribed
            return connected
        finally:
            await comm.disconnect()
            await live.hub().close()

    async def bounded() -> bool:
        return await asyncio.wait_for(connect(), 20)

    assert arun(bounded())
