"""Why-4 item 1 (engine): the list sorts oldest first too, bounds a created-between range at both ends, pages
back from a cursor to exactly the page before, and its per-kind / per-tag indexes follow tag writes and
retention."""

from __future__ import annotations

from ffcore.backend import Backend
from ffcore.engine.stream_scanners import delete_execution
from ffcore.execution.client import Client
from ffcore.execution.listing import Query, list_executions
from ffcore.keys import ExecKeys, PartitionKeys
from ffcore.reads import text

from .test_listing import LANES, _all_pages, _expected, _load


def ids(page) -> list[str]:
    return [r["execution_id"] for r in page.rows]


def test_oldest_first_is_newest_first_reversed_page_by_page(backend: Backend):
    _load(backend, 90)
    pages = _all_pages(backend, Query(limit=13, order="oldest"))
    assert [e for p in pages for e in p] == list(reversed(_expected(backend, LANES)))


def test_previous_pages_are_exactly_the_pages_before_in_both_orders(backend: Backend):
    _load(backend, 75)
    for order in ("newest", "oldest"):
        forward = []
        page = list_executions(backend, Query(limit=10, order=order), LANES)
        assert page.prev_cursor is None  # the first page has none before it
        while True:
            forward.append((ids(page), page.prev_cursor))
            if page.next_cursor is None:
                break
            page = list_executions(backend, Query(limit=10, order=order, cursor=page.next_cursor), LANES)
        for i in range(len(forward) - 1, 0, -1):
            back = list_executions(backend, Query(limit=10, order=order, cursor=forward[i][1], direction="prev"),
                                   LANES)
            assert ids(back) == forward[i - 1][0], (order, i)
            assert (back.prev_cursor is None) == (i == 1)


def test_a_created_between_range_shows_exactly_the_executions_created_in_it(backend: Backend):
    made = _load(backend, 120)
    created = {e: int(text(backend.client.hget(ExecKeys(e).core, "created_at"))) for e in made}
    times = sorted(set(created.values()))
    lo, hi = times[1], times[-2]  # batches share a created time: drop the first and last batch
    inside = {e for e, t in created.items() if lo <= t <= hi}
    assert 0 < len(inside) < len(made)
    for q in (Query(limit=500, created_from=lo, created_to=hi),
              Query(limit=500, created_from=lo, created_to=hi, order="oldest"),
              Query(limit=500, created_from=lo, created_to=hi, kind="k2"),
              Query(limit=500, created_from=lo, created_to=hi, state="waiting")):
        page = list_executions(backend, q, LANES)
        expect = {e for e in inside if q.kind is None or e in set(_expected(backend, LANES, kind=q.kind))}
        assert set(ids(page)) == expect and page.next_cursor is None, q
    # The walk stops at the range's far end: it examines no entry created before it.
    page = list_executions(backend, Query(limit=500, created_from=hi), LANES)
    assert page.examined == sum(t >= hi for t in created.values())


def test_a_tag_filter_reads_the_tags_own_index_which_follows_tag_writes_and_retention(backend: Backend):
    c = Client(backend)
    a = c.create(kind="job", lane="alpha", tags={"team": "blue"}).execution_id
    b = c.create(kind="job", lane="alpha").execution_id
    c.set_tags(b, {"app.team": "blue"})
    assert ids(list_executions(backend, Query(tag=("team", "blue")), LANES)) == [a]
    page = list_executions(backend, Query(tag=("app.team", "blue")), LANES)
    assert ids(page) == [b] and page.examined == 1 and page.tags[b] == {"app.team": "blue"}
    c.set_tags(b, {"app.team": "red"})  # overwritten: out of the old value's index, into the new one's
    n = ExecKeys(b).eid.partition_index
    assert backend.client.zscore(PartitionKeys(n).tag_created("app.team", "blue"), b) is None
    assert ids(list_executions(backend, Query(tag=("app.team", "red")), LANES)) == [b]
    c.cancel(b, reason="done")
    delete_execution(backend, b, "alpha")  # retention: its kind and tag entries go with it
    assert backend.client.zscore(PartitionKeys(n).tag_created("app.team", "red"), b) is None
    assert backend.client.zscore(PartitionKeys(n).kind_created("job"), b) is None
    assert ids(list_executions(backend, Query(kind="job"), LANES)) == [a]


def test_the_index_reconciler_lists_a_foreign_execution_in_its_kind_and_tag_indexes(backend: Backend):
    from ffcore.engine.index_reconciler import IndexReconciler

    eid = str(Client(backend).create(kind="rust-job", lane="alpha", tags={"team": "red"}).execution_id)
    ix = PartitionKeys(ExecKeys(eid).eid.partition_index)
    for key in (ix.created, ix.kind_created("rust-job"), ix.tag_created("team", "red")):
        backend.client.zrem(key, eid)  # as if another client of the library had created it
    assert ids(list_executions(backend, Query(kind="rust-job"), LANES)) == []
    assert IndexReconciler(backend, batch=50).tick() == 1
    assert ids(list_executions(backend, Query(kind="rust-job"), LANES)) == [eid]
    assert ids(list_executions(backend, Query(tag=("team", "red")), LANES)) == [eid]
