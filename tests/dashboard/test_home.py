import pytest
from django.contrib.auth.models import User

pytestmark = pytest.mark.django_db


def test_every_page_requires_sign_in(client, dashboard_backend):
    r = client.get("/")
    assert r.status_code == 302
    assert r["Location"].startswith("/login/")


def test_system_page_shows_valkey_library_and_partitions(client, dashboard_backend):
    User.objects.create_user("viewer1", password="pw-123456")
    # Through the sign-in form: the throttled backend (django-axes) needs the request that client.login omits.
    assert client.post("/login/", {"username": "viewer1", "password": "pw-123456"}).status_code == 302
    html = client.get("/system/").content.decode()
    assert dashboard_backend.server in html
    assert "contract v6" in html
    assert "256 flow · 32 budget · 32 quota" in html
    assert f"127.0.0.1:{dashboard_backend.url.rsplit(':', 1)[1].split('/')[0]}" in html
