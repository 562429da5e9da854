"""The overview's charts and recent failures (issue #25, item 4)."""

from __future__ import annotations

import re

import pytest

from dashboard.selectors import charts
from ffcore.engine import stats

pytestmark = pytest.mark.django_db


def test_the_overview_draws_throughput_backlog_and_latency_from_the_sampler(viewer_client, seed, dashboard_backend):
    html = viewer_client.get("/").content.decode()
    for chart in ("chart-throughput", "chart-backlog", "chart-latency"):
        assert f'id="{chart}"' in html
    assert 'data-total="0"' in html  # nothing sampled yet: empty charts, not an error
    assert 'class="failure-reason"' in html and "ValueError: boom" in html  # recent failures show their error
    stats.sample(dashboard_backend, settle_ms=0)  # its backlog sample in this minute, the one the page shows
    html = viewer_client.get("/", HTTP_HX_REQUEST="true").content.decode()  # the live partial carries them too
    assert 'data-total="2"' in html  # the seed's completed and failed executions
    assert re.search(r'<rect class="bar-done"[^>]*><title data-fmt="hm" data-ms="\d+" '
                     r'data-rest=": 1 completed, 1 failed">[^<]*: 1 completed, 1 failed</title>', html)
    assert re.search(r'<rect class="bar-failed"', html)
    assert re.search(r'<polyline class="line series-\d" points="[\d., ]+"><title>default</title>', html)
    assert re.search(r'<tr data-lane="default">.*?p50 <strong>\d+ ms</strong>', html, re.S)
    assert "<script" not in html.split('id="charts"')[1].split("</div>")[0]  # no script in the charts


def test_durations_and_axis_tops_read_well():
    assert [charts.fmt_ms(v) for v in (850, 3400, 126_000)] == ["850 ms", "3.4 s", "2.1 min"]
    assert [charts._nice_max(v) for v in (0, 3, 11, 101)] == [1, 5, 20, 200]
