"""The stream tail page over HTTP: escaping, badges, capped frames, "load earlier", the detail section,
and the live opt-ins of the existing pages."""

from __future__ import annotations

import re

import pytest

from dashboard.selectors.streams import FRAME_CAP, PAGE_FRAMES
from ffcore.execution.client import Client
from ffcore.worker.worker import Registry, Worker, WorkerConfig


@pytest.fixture
def task(dashboard_backend):
    Client(dashboard_backend).create(kind="job")
    (t,) = Worker(dashboard_backend, WorkerConfig(worker_instance_id="w-sp"), Registry()).claim_next(1)
    return t


def _url(t) -> str:
    return f"/executions/{t.execution_id}/attempts/{t.attempt_index}/stream/"


def test_frames_are_escaped_badged_and_long_ones_capped(viewer_client, task):
    task.append_frame("<b>type", "<script>alert(1)</script>")
    task.append_frame("log", "y" * (FRAME_CAP + 50))
    task.append_frame("bin", b"\xff\xfe\x00")
    html = viewer_client.get(_url(task)).content.decode()
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;b&gt;type" in html and 'class="badge ft ft--b-type"' in html
    assert "y" * FRAME_CAP in html and "y" * (FRAME_CAP + 1) not in html and "show all" in html
    assert "ff fe 00" in html
    assert 'data-closed=""' in html and ">live<" in html


def test_show_all_returns_the_whole_frame(viewer_client, task):
    fid = task.append_frame("log", "z" * (FRAME_CAP + 10)).stream_id
    r = viewer_client.get(_url(task) + f"frames/{fid}", HTTP_HX_REQUEST="true")
    body = r.content.decode()
    assert r.status_code == 200 and "z" * (FRAME_CAP + 10) in body and "show all" not in body
    assert viewer_client.get(_url(task) + "frames/nope").status_code == 404


def test_load_earlier_pages_back_from_the_oldest_shown_frame(viewer_client, task, dashboard_backend):
    ids = [r.stream_id for r in (task.append_frame("log", str(n)) for n in range(PAGE_FRAMES + 5))]
    html = viewer_client.get(_url(task)).content.decode()
    shown = re.findall(r'<li class="frame" id="f-([0-9-]+)"', html)
    assert shown == ids[5:] and "Load earlier frames" in html
    r = viewer_client.get(_url(task) + f"?before={ids[5]}", HTTP_HX_REQUEST="true")
    body = r.content.decode()
    assert re.findall(r'<li class="frame" id="f-([0-9-]+)"', body) == ids[:5]
    assert 'hx-swap-oob="true"' in body and "Load earlier frames" not in body
    assert viewer_client.get(_url(task) + "?before=<x>").status_code == 400


def test_a_closed_stream_shows_its_marker_and_the_detail_links_it(viewer_client, task):
    task.append_frame("log", "last words")
    task.complete()
    html = viewer_client.get(_url(task)).content.decode()
    assert "stream closed: attempt_success" in html and 'data-closed="1"' in html
    detail = viewer_client.get(f"/executions/{task.execution_id}/").content.decode()
    assert 'data-stream-link="0"' in detail and "view frames" in detail


def test_an_unknown_execution_is_a_404_and_anonymous_viewers_sign_in(client, viewer_client, dashboard_backend):
    eid = "{fp:1}:00000000-0000-4000-8000-000000000000"
    assert viewer_client.get(f"/executions/{eid}/attempts/0/stream/").status_code == 404
    assert client.get(f"/executions/{eid}/attempts/0/stream/").status_code in (302, 404)


def test_pages_opt_in_to_pushed_refreshes(viewer_client, task, dashboard_backend):
    assert 'data-live="overview"' in viewer_client.get("/").content.decode()
    assert 'data-live-mode="banner"' in viewer_client.get("/executions/").content.decode()
    html = viewer_client.get(f"/executions/{task.execution_id}/").content.decode()
    assert f'data-live="{task.execution_id}"' in html and 'data-live-url=' in html
    # the pushed refresh fetches the same partial the page rendered first
    part = viewer_client.get(f"/executions/{task.execution_id}/", HTTP_HX_REQUEST="true").content.decode()
    assert part.lstrip().startswith('<div id="execution-live"')
