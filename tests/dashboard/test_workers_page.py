"""The Workers page (#25 item 6): live, stale (since when, with its leases and their expiry) and gone."""

import re

import pytest

from ffcore import keys
from ffcore.execution.client import Client
from ffcore.worker.heartbeat import Heartbeat

pytestmark = pytest.mark.django_db


def _register(backend, wiid, worker_id, leases=()):
    hb = Heartbeat(backend, worker_id=worker_id, wiid=wiid, lanes=("l",), capabilities_csv="gpu", concurrency=4,
                   interval_ms=1000, lease_ttl_ms=5000)
    hb.register()
    hb.beat(list(leases))
    return hb


def _row(html, wiid):
    return re.search(rf'<tr id="{re.escape(wiid)}".*?</tr>', html, re.S).group(0)


def test_live_stale_and_gone_workers_are_each_labelled(viewer_client, dashboard_backend):
    b = dashboard_backend
    eid = Client(b).create(kind="k").execution_id
    _register(b, "wi-live", "alpha")
    _register(b, "wi-stale", "beta", leases=[eid])
    b.client.hset(keys.worker("wi-stale"), "last_heartbeat_at", str(b.now_ms() - 60_000))
    _register(b, "wi-gone", "gamma")
    b.client.delete(keys.worker("wi-gone"))
    html = viewer_client.get("/workers/").content.decode()
    assert 'data-status="live"' in _row(html, "wi-live") and "alpha" in _row(html, "wi-live")
    stale = _row(html, "wi-stale")
    assert 'data-status="stale"' in stale and "since <time" in stale and f">{eid}</a>" in stale
    assert 'data-status="gone"' in _row(html, "wi-gone") and "registration expired" in _row(html, "wi-gone")
    assert '<span data-count="live">1</span>' in html and '<span class="warn" data-count="stale">1</span>' in html
    # Live first, then stale, then gone.
    assert html.index('id="wi-live"') < html.index('id="wi-stale"') < html.index('id="wi-gone"')
    # The live refresh renders the same partial.
    r = viewer_client.get("/workers/", HTTP_HX_REQUEST="true")
    assert r.status_code == 200 and "<html" not in r.content.decode() and 'id="workers-live"' in r.content.decode()
