"""The top bar names the upstream release a dashboard operates (issue #40 item 1), on every page; on our own
library it says nothing of the kind."""

from __future__ import annotations

import pytest

from tests.upstream_scenario import *  # noqa: F403 - the deployment's fixtures

pytestmark = pytest.mark.django_db
BADGE = "Operating upstream FlowFabric v0.14–v0.15 (ff_version 34)"


@pytest.mark.parametrize("url", ["/audit/", "/system/"])
def test_every_page_on_an_upstream_deployment_names_the_operated_release(viewer_client, upstream_dashboard, url):
    r = viewer_client.get(url)
    assert r.status_code == 200
    html = r.content.decode()
    assert 'id="upstream-mode"' in html and BADGE in html


def test_the_bar_on_our_own_library_names_no_upstream_release(viewer_client, dashboard_backend):
    html = viewer_client.get("/audit/").content.decode()
    assert "upstream-mode" not in html and "Operating upstream" not in html


def test_the_sign_in_page_does_not_connect_for_the_badge(client, upstream_dashboard):
    assert "upstream-mode" not in client.get("/login/").content.decode()
