"""Issue #36: a payload or result too big for the page (1.2 MB) can be read whole and downloaded, by the
same users who may read the page."""

from __future__ import annotations

import re

import pytest
from django.test import Client as HttpClient

from ffcore.execution.client import Client
from ffcore.worker.worker import Worker, WorkerConfig
from tests.keyspace import MISSING_EID

pytestmark = pytest.mark.django_db

BIG = ("{\"rows\": [" + ",".join(f'"row {i} <b>x</b>"' for i in range(80_000)) + "]}").encode()


def _completed(backend, payload: bytes, result: bytes) -> str:
    eid = Client(backend).create(kind="big", payload=payload).execution_id
    (task,) = Worker(backend, WorkerConfig(worker_id="w-big")).claim_next(1)
    task.complete(result)
    return eid


def test_a_truncated_payload_links_to_reading_it_whole_and_to_a_download(viewer_client, dashboard_backend):
    assert len(BIG) > 1_200_000
    eid = _completed(dashboard_backend, BIG, b"done")
    html = viewer_client.get(f"/executions/{eid}/").content.decode()
    assert "truncated (first 65536 shown)" in html
    whole = re.search(r'<a class="value-whole" href="([^"]+)"', html).group(1)
    r = viewer_client.get(whole)
    assert r.status_code == 200 and r.content == BIG
    assert r["Content-Type"] == "text/plain; charset=utf-8" and r["X-Content-Type-Options"] == "nosniff"
    assert r["Content-Disposition"].startswith("inline;")
    download = re.search(r'<a class="value-download" href="([^"]+)"', html).group(1)
    r = viewer_client.get(download.replace("&amp;", "&"))
    assert r.status_code == 200 and r.content == BIG
    assert r["Content-Disposition"] == f'attachment; filename="{eid.rsplit(":", 1)[-1]}-payload.txt"'


def test_the_result_downloads_whole_and_binary_is_always_an_attachment(viewer_client, dashboard_backend):
    blob = bytes(range(256)) * 40
    eid = _completed(dashboard_backend, b"{}", blob)
    r = viewer_client.get(f"/executions/{eid}/result/whole")
    assert r.status_code == 200 and r.content == blob
    assert r["Content-Type"] == "application/octet-stream" and r["Content-Disposition"].startswith("attachment;")
    assert r["Content-Disposition"].endswith('-result.bin"')


def test_unknown_executions_missing_values_and_other_names_are_404(viewer_client, dashboard_backend):
    eid = Client(dashboard_backend).create(kind="k").execution_id
    assert viewer_client.get(f"/executions/{eid}/result/whole").status_code == 404  # no result yet
    assert viewer_client.get(f"/executions/{eid}/policy/whole").status_code == 404
    assert viewer_client.get(f"/executions/{MISSING_EID}/payload/whole").status_code == 404
    assert viewer_client.get("/executions/not-an-id/payload/whole").status_code == 404


def test_signed_out_visitors_are_sent_to_sign_in(dashboard_backend):
    eid = _completed(dashboard_backend, b"secret", b"secret too")
    r = HttpClient().get(f"/executions/{eid}/payload/whole")
    assert r.status_code == 302 and "/login/" in r["Location"] and b"secret" not in r.content
