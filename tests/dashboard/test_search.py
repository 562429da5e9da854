"""Search by bare UUID, flow / waitpoint id and id prefix; saved views per user (issue #25, item 3)."""

from __future__ import annotations

from urllib.parse import unquote

import pytest
from django.test import Client as DjangoClient

from dashboard.models import SavedView
from ffcore.execution import search as finder
from ffcore.flows.flows import Flows
from ffcore.ids import ExecutionId
from ffcore.suspension import hmac_secrets
from tests.ffcore.suspension_support import claimed

pytestmark = pytest.mark.django_db


def test_a_bare_uuid_finds_its_execution_on_any_partition_in_one_round_trip(viewer_client, seed, dashboard_backend):
    for eid in (seed.completed, seed.active):  # lanes hash to different partitions
        bare = ExecutionId(eid).uuid
        r = viewer_client.get(f"/search/?q={bare}")
        assert r.status_code == 302 and unquote(r["Location"]) == f"/executions/{eid}/"
        r = viewer_client.get(f"/executions/?id={bare.upper()}")  # the header's jump box takes it too
        assert r.status_code == 302 and unquote(r["Location"]) == f"/executions/{eid}/"
    calls = []
    real = dashboard_backend.client.pipeline

    def counting(*a, **kw):
        calls.append(1)
        return real(*a, **kw)

    dashboard_backend.client.pipeline = counting
    try:
        assert finder.search(dashboard_backend, ExecutionId(seed.waiting).uuid).target == seed.waiting
    finally:
        dashboard_backend.client.pipeline = real
    assert len(calls) == 1


def test_a_flow_id_and_a_waitpoint_id_open_their_pages(viewer_client, dashboard_backend):
    flows = Flows(dashboard_backend)
    fid = flows.create(kind="find")
    r = viewer_client.get(f"/search/?q={fid}")
    assert r.status_code == 302 and r["Location"] == f"/flows/{fid}/"
    hmac_secrets.install(dashboard_backend, "ef" * 16)
    t = claimed(dashboard_backend, kind="approve", lane="find")
    wid = t.suspend(["ok"], timeout_ms=600_000).waitpoint_id
    r = viewer_client.get(f"/search/?q={wid}")
    assert r.status_code == 302
    assert unquote(r["Location"]) == f"/waitpoints/?execution={t.execution_id}#wp-{wid}"


def test_a_prefix_lists_the_recent_executions_it_matches(viewer_client, seed, dashboard_backend):
    bare = ExecutionId(seed.completed).uuid
    r = viewer_client.get(f"/search/?q={bare[:8]}")
    assert r.status_code == 200
    html = r.content.decode()
    assert seed.completed in html and 'id="search-results"' in html
    others = [e for e in (seed.waiting, seed.active, seed.failed) if not ExecutionId(e).uuid.startswith(bare[:8])]
    assert others and not any(e in html for e in others)
    r = viewer_client.get(f"/executions/?id={bare[:10]}")  # the jump box sends a prefix to the search page
    assert r.status_code == 302 and r["Location"].startswith("/search/?q=")


def test_what_is_not_an_id_or_a_long_enough_prefix_is_a_400_and_an_id_of_nothing_a_404(viewer_client,
                                                                                        dashboard_backend):
    r = viewer_client.get("/search/?q=00000000-0000-4000-8000-000000000000")
    assert r.status_code == 404 and 'id="search-nothing"' in r.content.decode()
    for q in ("abc", "zzzzzzzzzz", "{fp:1}:nope", "x" * 5000):
        r = viewer_client.get("/search/", {"q": q})
        assert r.status_code == 400 and 'data-error="q"' in r.content.decode(), q
        r = viewer_client.get("/executions/", {"id": q})
        assert r.status_code == 400 and 'data-error="id"' in r.content.decode(), q


def test_saved_views_round_trip_per_user(viewer, operator, seed):
    vera, otto = DjangoClient(), DjangoClient()
    vera.force_login(viewer)
    otto.force_login(operator)
    r = vera.post("/saved-views/", {"name": "gpu work", "query": "lane=gpu&state=active&cursor=x&junk=1"},
                  HTTP_HX_REQUEST="true")
    assert r.status_code == 200 and "gpu work" in r.content.decode()
    (sv,) = SavedView.objects.filter(user=viewer)
    assert sv.query == "lane=gpu&state=active"  # only the list's filters are kept
    page = vera.get("/executions/").content.decode()
    assert 'href="/executions/?lane=gpu&amp;state=active">gpu work</a>' in page
    assert "gpu work" not in otto.get("/executions/").content.decode()  # views are per user
    assert seed.active in vera.get("/executions/?" + sv.query).content.decode()
    # Another user cannot delete it; its owner can.
    assert otto.post(f"/saved-views/{sv.pk}/delete").status_code == 404
    assert SavedView.objects.filter(pk=sv.pk).exists()
    r = vera.post(f"/saved-views/{sv.pk}/delete", HTTP_HX_REQUEST="true")
    assert r.status_code == 200 and not SavedView.objects.filter(pk=sv.pk).exists()


def test_a_bad_saved_view_is_a_400_next_to_the_field_and_saves_nothing(viewer_client, viewer, dashboard_backend):
    for data, field in (({"name": "", "query": "lane=gpu"}, "name"), ({"name": "x" * 81, "query": ""}, "name"),
                        ({"name": "bad state", "query": "state=exploded"}, "query"),
                        ({"name": "bad tag", "query": "tag=novalue"}, "query"),
                        ({"name": "bad limit", "query": "limit=0"}, "query")):
        r = viewer_client.post("/saved-views/", data, HTTP_HX_REQUEST="true")
        assert r.status_code == 400 and f'data-error="{field}"' in r.content.decode(), data
    assert not SavedView.objects.filter(user=viewer).exists()
    r = viewer_client.post("/saved-views/", {"name": "everything", "query": "cursor=1"}, HTTP_HX_REQUEST="true")
    assert r.status_code == 400 and 'data-error="query"' in r.content.decode()  # no filter left to keep
    assert viewer_client.post("/saved-views/", {"name": "mine", "query": "kind=x"}).status_code == 302
    r = viewer_client.post("/saved-views/", {"name": "mine", "query": "lane=x"}, HTTP_HX_REQUEST="true")
    assert r.status_code == 400 and "already have a view with this name" in r.content.decode()
    assert SavedView.objects.filter(user=viewer).count() == 1


def test_a_saved_view_that_fails_validation_keeps_the_lists_filter_for_the_retry(viewer_client, viewer):
    r = viewer_client.post("/saved-views/", {"name": "", "query": "lane=gpu&state=active"}, HTTP_HX_REQUEST="true")
    html = r.content.decode()
    assert r.status_code == 400 and 'data-error="name"' in html
    assert 'name="query" value="lane=gpu&amp;state=active"' in html
    r = viewer_client.post("/saved-views/", {"name": "gpu", "query": "lane=gpu&state=active"}, HTTP_HX_REQUEST="true")
    assert r.status_code == 200 and SavedView.objects.get(user=viewer).query == "lane=gpu&state=active"
