"""Cross-partition listing: the merge's order, ties and cursors, selective post-filters (examined by their
fields, whole rows read for the page only), the stored total."""

from __future__ import annotations

from ffcore.backend import Backend
from ffcore.execution import listing
from ffcore.execution.client import Client
from ffcore.execution.listing import Query, list_executions, total_created
from ffcore.keys import ExecKeys, PartitionKeys
from ffcore.reads import decode_map, text
from tests.ffcore.roundtrips import counting_pipelines

LANES = ["alpha", "beta", "gamma", "delta"]  # four lanes on four different partitions


def _load(backend: Backend, n: int, batch: int = 40) -> list[str]:
    """`n` executions over LANES, kinds k0..k6 in turn; a batch shares one created time (many ties)."""
    c = Client(backend)
    out: list[str] = []
    for start in range(0, n, batch):
        specs = [{"kind": f"k{i % 7}", "lane": LANES[i % 4], "payload": b"x"}
                 for i in range(start, min(n, start + batch))]
        out += [r.execution_id for r in c.create_many(specs)]
    return out


def _expected(backend: Backend, lanes: list[str], kind: str | None = None) -> list[str]:
    """Newest first by (created score, id), read the slow way: every index member, every core."""
    c = Client(backend)
    rows = []
    for n in sorted({c.lane_partitions(lanes)[lane][0] for lane in lanes}):
        for m, score in backend.client.zrange(PartitionKeys(n).created, 0, -1, withscores=True):
            eid = text(m)
            if kind is None or c.get_execution(eid, with_attempts=False)["execution_kind"] == kind:
                rows.append((score, eid))
    return [e for _, e in sorted(rows, reverse=True)]


def _all_pages(backend: Backend, q: Query) -> list[list[str]]:
    pages, cursor = [], None
    while True:
        page = list_executions(backend, Query(**{**q.__dict__, "cursor": cursor}), LANES)
        pages.append([r["execution_id"] for r in page.rows])
        if page.next_cursor is None:
            return pages
        cursor = page.next_cursor


def test_pages_across_partitions_are_newest_first_with_ties_and_never_repeat(backend: Backend):
    made = _load(backend, 230)
    pages = _all_pages(backend, Query(limit=17))
    seen = [e for p in pages for e in p]
    assert seen == _expected(backend, LANES)
    assert sorted(seen) == sorted(made)
    assert all(len(p) == 17 for p in pages[:-1]) and len(pages) == -(-230 // 17)


def test_a_selective_kind_filter_pages_exactly_and_reads_in_few_round_trips(backend: Backend):
    _load(backend, 420)
    want = _expected(backend, LANES, kind="k3")
    assert len(want) == 60
    with counting_pipelines(backend) as trips:
        first = list_executions(backend, Query(kind="k3", limit=25), LANES)
    assert [r["execution_id"] for r in first.rows] == want[:25]
    assert {r["execution_kind"] for r in first.rows} == {"k3"}
    # The kind's own index: every entry examined is a row shown (no post-filtered misses).
    assert len(trips) <= 4 and first.examined == 25, (len(trips), first.examined)
    assert [e for p in _all_pages(backend, Query(kind="k3", limit=25)) for e in p] == want


def test_a_filter_with_no_match_ends_without_a_cursor(backend: Backend):
    _load(backend, 100)
    page = list_executions(backend, Query(kind="nothing-like-this"), LANES)
    assert page.rows == [] and page.next_cursor is None and page.examined == 0  # its kind index is empty
    page = list_executions(backend, Query(lane="alpha", state="completed"), LANES)
    assert page.rows == [] and page.next_cursor is None


def test_examining_stops_at_the_cap_and_the_cursor_resumes_where_it_stopped(backend: Backend):
    _load(backend, 140)
    parts = sorted({n for ns in listing.lane_partition_map(backend, LANES).values() for n in ns})
    keys = [PartitionKeys(n).created for n in parts]
    looked: list[str] = []

    def reject(batch: list[listing.Item]) -> list[bool]:
        looked.extend(m for _, m, _ in batch)
        return [False] * len(batch)

    cursor, rounds = None, 0
    while True:
        rows, cursor, examined = listing.merge(backend, keys, listing.parse_cursor(cursor), 5, reject, max_examined=30)
        rounds += 1
        assert rows == [] and examined <= 30
        if cursor is None:
            break
    assert looked == _expected(backend, LANES)  # every entry once, in order, across capped calls
    assert rounds == 5


def test_the_stored_total_counts_the_partitions_the_list_reads(backend: Backend):
    _load(backend, 90)
    page = list_executions(backend, Query(limit=5), LANES)
    assert len(page.partitions) == 4
    assert total_created(backend, page.partitions) == 90
    assert total_created(backend) == 90
    assert total_created(backend, []) == 0


def test_a_long_run_of_equal_created_times_is_paged_without_rereading_it(backend: Backend):
    made = [r.execution_id for r in Client(backend).create_many([{"kind": "tie", "lane": "alpha"} for _ in range(700)])]
    _load(backend, 60)  # newer ones on the other lanes too
    want = _expected(backend, LANES)
    assert len(want) == 760
    seen, cursor, trips = [], None, 0
    while True:
        with counting_pipelines(backend) as counted:
            page = list_executions(backend, Query(limit=50, cursor=cursor), LANES)
        trips = max(trips, len(counted))
        seen += [r["execution_id"] for r in page.rows]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == want and set(made) <= set(seen)
    assert trips <= 4, trips  # registry, one or two index reads, rows: not a read per batch of the 700 ties


def _before_each_read(backend: Backend, monkeypatch, hook) -> None:
    """Call `hook(commands)` before every read_many batch the listing sends (to observe or to interfere)."""
    real = backend.read_many

    def wrapped(cmds, *a, **kw):
        hook(cmds)
        return real(cmds, *a, **kw)

    monkeypatch.setattr(backend, "read_many", wrapped)


def _is_row_read(command: tuple) -> bool:
    return command[0] == "HMGET" and len(command) == 2 + len(listing.ROW_FIELDS)


def test_a_kind_filter_reads_its_own_index_and_whole_rows_only_for_the_page(backend: Backend, monkeypatch):
    _load(backend, 140)
    commands: list[tuple] = []
    _before_each_read(backend, monkeypatch, commands.extend)
    page = list_executions(backend, Query(kind="k3", limit=10), LANES)
    full = [c for c in commands if _is_row_read(c)]
    narrow = [c for c in commands if c[0] == "HMGET" and not _is_row_read(c)]
    assert len(full) == 10 and narrow == []  # the kind's index holds only that kind: nothing read to skip
    # The rows are the whole rows, as read the slow way.
    for row in page.rows:
        stored = decode_map(backend.client.hgetall(ExecKeys(row["execution_id"]).core))
        assert row == {f: stored.get(f, "") for f in listing.ROW_FIELDS}
    assert {r["execution_kind"] for r in page.rows} == {"k3"}


def test_a_row_that_stops_matching_before_its_row_is_read_is_not_shown(backend: Backend, monkeypatch):
    _load(backend, 140)
    want = _expected(backend, LANES, kind="k3")[:6]

    def change_first(cmds) -> None:
        if _is_row_read(cmds[0]):  # the rows of the page: one changes kind just before they are read
            backend.client.hset(ExecKeys(want[0]).core, "execution_kind", "k4")

    _before_each_read(backend, monkeypatch, change_first)
    page = list_executions(backend, Query(kind="k3", limit=5), LANES)
    assert [r["execution_id"] for r in page.rows] == want[1:]  # the index still names it: its row decides
    assert page.next_cursor is not None
