"""Why-4 item 1 (page): the executions list shows lane, duration and tags, sorts newest or oldest first, filters
by a created-between range (a bad bound is a form error next to it) and pages back as well as forward."""

from __future__ import annotations

import re
from html import unescape

import pytest

from ffcore.execution.client import Client
from ffcore.keys import ExecKeys
from ffcore.reads import text

pytestmark = pytest.mark.django_db


def shown(html: str) -> list[str]:
    return re.findall(r'<tr data-href="[^"]*" data-eid="([^"]+)"', html)


def made(backend, n: int) -> list[str]:
    """`n` executions, oldest first, each created in a later millisecond than the one before."""
    c = Client(backend)
    out: list[str] = []
    for i in range(n):
        out.append(str(c.create(kind="job", lane="default", tags={"team": "blue" if i % 2 else "red"}).execution_id))
        while backend.now_ms() <= created(backend, out[-1]):
            pass
    return out


def created(backend, eid: str) -> int:
    return int(text(backend.client.hget(ExecKeys(eid).core, "created_at")))


def test_the_list_shows_lane_duration_and_tags_columns(viewer_client, seed):
    html = viewer_client.get("/executions/").content.decode()
    assert "<th>Lane</th>" in html and "<th class=\"num\">Duration</th>" in html and "<th>Tags</th>" in html
    row = html[html.index(f'data-eid="{seed.completed}"'):]
    row = row[:row.index("</tr>")]
    assert '<td data-col="lane">default</td>' in row
    assert re.search(r'data-col="duration">\d[^<]*(ms|s|min)<', row), row
    assert '<span class="tag mono">team=blue</span>' in row


def test_oldest_first_and_paging_back_show_the_same_rows_in_the_same_pages(viewer_client, dashboard_backend):
    eids = made(dashboard_backend, 7)
    newest = viewer_client.get("/executions/?limit=3").content.decode()
    assert shown(newest) == eids[::-1][:3]
    oldest = viewer_client.get("/executions/?limit=3&order=oldest").content.decode()
    assert shown(oldest) == eids[:3] and 'id="prev-page"' not in oldest
    nxt = unescape(re.search(r'id="more"><td colspan="10"><a href="\?([^"]+)"', oldest).group(1))
    second = viewer_client.get("/executions/?" + nxt).content.decode()
    assert shown(second) == eids[3:6]
    prev = unescape(re.search(r'<a href="\?([^"]+)" rel="prev"', second).group(1))
    assert "direction=prev" in prev and "order=oldest" in prev
    assert shown(viewer_client.get("/executions/?" + prev).content.decode()) == eids[:3]


def test_a_created_between_range_filters_the_list_and_a_bad_bound_is_an_error_next_to_it(viewer_client,
                                                                                        dashboard_backend):
    eids = made(dashboard_backend, 5)
    lo, hi = created(dashboard_backend, eids[1]), created(dashboard_backend, eids[3])
    html = viewer_client.get(f"/executions/?created_from={lo}&created_to={hi}").content.decode()
    assert shown(html) == eids[3:0:-1]
    html = viewer_client.get(f"/executions/?created_from={lo}&created_to={hi}&tag=team%3Dblue").content.decode()
    assert shown(html) == [eids[3], eids[1]]
    for bad, field in (("created_from=yesterday", "created_from"), (f"created_from={hi}&created_to={lo}",
                                                                    "created_to"), ("order=sideways", "order")):
        r = viewer_client.get("/executions/?" + bad)
        assert r.status_code == 400 and f'data-error="{field}"' in r.content.decode(), bad
