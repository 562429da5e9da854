"""Live rows of the executions list (issue #25, item 1): the pushes name the changed executions, and the
rows endpoint re-renders exactly those rows, marking the ones that left the filter instead of dropping them."""

from __future__ import annotations

import asyncio
import re

import pytest

from ffcore import events
from ffcore.execution.client import Client
from ffcore.worker.worker import Registry, Worker, WorkerConfig
from tests.dashboard.test_consumers import communicator, cookie, redis_layer, run  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db(transaction=True)


def _rows(html: str) -> dict[str, str]:
    return dict(re.findall(r'<tr data-href="[^"]*" data-eid="([^"]+)"([^>]*)>', html))


def test_the_list_rows_carry_their_ids_and_the_live_rows_url(viewer_client, seed):
    html = viewer_client.get("/executions/?state=waiting").content.decode()
    assert 'data-live-mode="rows"' in html and 'data-live-url="/live/rows/?state=waiting"' in html
    assert seed.waiting in _rows(html)


def test_changed_rows_come_back_in_their_new_state_and_rows_that_left_the_filter_are_marked(viewer_client, seed,
                                                                                        dashboard_backend):
    Client(dashboard_backend).cancel(seed.waiting, reason="test")
    r = viewer_client.get("/live/rows/", {"ids": f"{seed.waiting},{seed.xss}", "state": "delayed"},
                          HTTP_HX_REQUEST="true")
    assert r.status_code == 200
    body = r.content.decode()
    rows = _rows(body)
    assert list(rows) == [seed.waiting, seed.xss]  # the rows asked for, in that order, and nothing else
    assert 'class="left-filter"' in rows[seed.waiting] and "left the filter" in body  # was never delayed
    assert "cancelled" in body
    assert "left-filter" not in rows[seed.xss]  # still delayed (released by the seed): unmarked
    assert "<html" not in body and "<script>alert(1)" not in body
    # Without a filter nothing is "left"; a tag filter is checked against the execution's tags.
    assert "left-filter" not in viewer_client.get("/live/rows/", {"ids": seed.waiting}).content.decode()
    tagged = viewer_client.get("/live/rows/", {"ids": f"{seed.completed},{seed.failed}", "tag": "team=blue"})
    marks = _rows(tagged.content.decode())
    assert "left-filter" not in marks[seed.completed] and "left-filter" in marks[seed.failed]


def test_a_row_whose_execution_is_gone_is_marked_and_bad_requests_are_400s(viewer_client, seed):
    gone = "{fp:3}:00000000-0000-4000-8000-000000000000"
    body = viewer_client.get("/live/rows/", {"ids": gone}).content.decode()
    assert "no longer stored" in body
    for params, field in (({}, "ids"), ({"ids": "nope"}, "ids"), ({"ids": ",".join([gone] * 101)}, "ids"),
                          ({"ids": gone, "state": "exploded"}, "state"), ({"ids": gone, "tag": "x"}, "tag")):
        r = viewer_client.get("/live/rows/", params)
        assert r.status_code == 400 and f'data-error="{field}"' in r.content.decode(), params


def test_a_push_to_the_list_carries_the_rendered_rows_of_the_executions_that_changed(redis_layer, cookie,  # noqa: F811
                                                                                       dashboard_backend):
    c = Client(dashboard_backend)
    eids = [c.create(kind="job").execution_id for _ in range(2)]
    events.flush_all()  # the creates' own (buffered) announcements go out before the page subscribes

    async def main():
        from dashboard import live

        comm = communicator("/ws/live/", cookie)
        assert (await comm.connect())[0]
        await comm.send_json_to({"views": [{"id": "execution-rows", "url": "/live/rows/", "topics": ["executions"],
                                            "mode": "rows"}]})
        await asyncio.wait_for(live.hub().ready.wait(), 5)
        await asyncio.sleep(0.1)
        await asyncio.to_thread(c.cancel, eids[0], reason="test")
        m = await comm.receive_json_from(timeout=5)
        assert m["type"] == "view" and m["id"] == "execution-rows" and m["mode"] == "rows"
        assert re.findall(r'data-eid="([^"]+)"', m["html"]) == [eids[0]]  # only the row that changed
        assert "cancelled" in m["html"]
        await comm.disconnect()

    run(main)


def test_the_flow_page_s_count_chips_follow_its_members(viewer_client, dashboard_backend):
    from ffcore.flows.flows import Flows

    flows = Flows(dashboard_backend)
    fid = flows.create(kind="chips")
    first, _ = flows.build(fid, [{"kind": "a", "lane": "chips"}, {"kind": "b", "lane": "chips"}], [(0, 1)])
    page = viewer_client.get(f"/flows/{fid}/").content.decode()
    assert f'id="flow-counts" data-live="{fid}" data-live-url="/flows/{fid}/counts"' in page
    (task,) = Worker(dashboard_backend, WorkerConfig(lanes=("chips",), worker_instance_id="w-chips"),
                     Registry()).claim_next(1)
    assert task.execution_id == first
    task.complete(b"ok")
    chips = viewer_client.get(f"/flows/{fid}/counts", HTTP_HX_REQUEST="true").content.decode()
    assert 'id="flow-counts"' in chips
    assert re.search(r'data-state="completed">1 ', chips) and "<html" not in chips
    assert viewer_client.get("/flows/00000000-0000-4000-8000-000000000000/counts").status_code == 404
