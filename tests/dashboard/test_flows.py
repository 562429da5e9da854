"""Flows pages: the list with counts, the DAG view (graph JSON, focus mode), cancel flow, the detail section."""

from __future__ import annotations

import json

import pytest

from ffcore import audit
from ffcore.backend import Backend
from ffcore.execution.client import Client
from ffcore.flows.dag import resolve_outgoing
from ffcore.flows.flows import Flows
from ffcore.keys import ExecKeys
from tests.ffcore.invariants import claim, complete, fail

pytestmark = pytest.mark.django_db


def _diamond(backend: Backend) -> tuple[str, list[str]]:
    flows = Flows(backend)
    fid = flows.create(kind="diamond")
    ids = flows.build(fid, [{"kind": k} for k in ("top", "left", "right", "bottom")],
                      edges=[(0, 1), (0, 2), (1, 3), (2, 3)])
    f = claim(backend, ids[0])
    complete(backend, ids[0], f)
    resolve_outgoing(backend, [(ids[0], fid, "success")])
    f = claim(backend, ids[1])
    fail(backend, ids[1], f)
    resolve_outgoing(backend, [(ids[1], fid, "failed")])
    return fid, ids


def test_the_flows_list_shows_member_counts_newest_first_and_pages(viewer_client, dashboard_backend):
    old, _ = _diamond(dashboard_backend)
    flows = Flows(dashboard_backend)
    new = flows.create(kind="single")
    flows.build(new, [{"kind": "only"}])
    r = viewer_client.get("/flows/")
    body = r.content.decode()
    assert r.status_code == 200
    assert body.index(new) < body.index(old)
    assert "1 completed" in body and "1 failed" in body and "1 skipped" in body and "1 waiting" in body
    row = body.split(f'data-href="/flows/{old}/"')[1].split("</tr>")[0]
    # Every row lists its counts in the same (state) order, not in whatever order the members were read.
    assert row.index("1 completed") < row.index("1 failed") < row.index("1 skipped")
    r = viewer_client.get("/flows/?limit=1")
    assert r.status_code == 200
    page = viewer_client.get("/flows/?cursor=" + "garbage")
    assert page.status_code == 400 and "malformed" in page.content.decode()


def test_flows_list_load_more_renders_the_next_rows(viewer_client, dashboard_backend):
    flows = Flows(dashboard_backend)
    made = [flows.create(kind=f"k{i}") for i in range(55)]
    r = viewer_client.get("/flows/")
    body = r.content.decode()
    assert made[-1] in body and made[0] not in body
    nxt = body.split('hx-get="?cursor=')[1].split('"')[0]
    more = viewer_client.get("/flows/?cursor=" + nxt.replace("&amp;", "&"), HTTP_HX_REQUEST="true")
    assert more.status_code == 200
    assert made[0] in more.content.decode() and "<h1>" not in more.content.decode()


def test_the_flow_page_shows_summary_counts_first_and_ships_the_graph(viewer_client, dashboard_backend):
    fid, ids = _diamond(dashboard_backend)
    r = viewer_client.get(f"/flows/{fid}/")
    body = r.content.decode()
    assert r.status_code == 200
    assert body.index('id="flow-summary"') < body.index('id="flow-graph"')
    assert 'id="flow-cancel"' not in body  # viewers do not get the action
    data = json.loads(body.split('<script id="flow-data" type="application/json">')[1].split("</script>")[0])
    assert {n["id"]: n["state"] for n in data["nodes"]} == {
        ids[0]: "completed", ids[1]: "failed", ids[2]: "waiting", ids[3]: "skipped"}
    assert {(e["from"], e["to"]): e["state"] for e in data["edges"]} == {
        (ids[0], ids[1]): "satisfied", (ids[0], ids[2]): "satisfied", (ids[1], ids[3]): "impossible",
        (ids[2], ids[3]): "unsatisfied"}
    assert all(n["href"] == f"/executions/{n['id']}/" for n in data["nodes"])
    states = viewer_client.get(f"/flows/{fid}/states.json").json()
    assert states["revision"] == data["revision"] and states["nodes"][ids[3]] == "skipped"


def test_unknown_and_malformed_flow_ids_are_404(viewer_client, dashboard_backend):
    assert viewer_client.get("/flows/not-a-uuid/").status_code == 404
    assert viewer_client.get("/flows/00000000-0000-4000-8000-000000000000/").status_code == 404
    assert viewer_client.get("/flows/00000000-0000-4000-8000-000000000000/states.json").status_code == 404


def test_a_big_flow_opens_in_focus_mode_with_collapsed_siblings(viewer_client, dashboard_backend):
    flows = Flows(dashboard_backend)
    fid = flows.create(kind="wide")
    n = 520
    ids = flows.build(fid, [{"kind": "root"}] + [{"kind": f"leaf{i}"} for i in range(n)],
                      edges=[(0, i) for i in range(1, n + 1)])
    focus = ids[7]
    r = viewer_client.get(f"/flows/{fid}/graph.json?focus={focus}&hops=2")
    data = r.json()
    assert data["focus"] == focus
    assert len(data["nodes"]) < 20
    groups = [x for x in data["nodes"] if x["state"] == "group"]
    assert groups and groups[0]["label"].startswith("+") and "waiting" not in groups[0]["label"]
    assert {focus, ids[0]} <= {x["id"] for x in data["nodes"]}
    page = viewer_client.get(f"/flows/{fid}/?focus={focus}")
    assert "showing" in page.content.decode() and page.status_code == 200
    bad = viewer_client.get(f"/flows/{fid}/?hops=99")
    assert bad.status_code == 400 and "Hops must be" in bad.content.decode()


def test_a_viewer_cannot_cancel_a_flow(viewer_client, dashboard_backend):
    fid, ids = _diamond(dashboard_backend)
    r = viewer_client.post(f"/flows/{fid}/cancel", {"cancel-reason": "nope"})
    assert r.status_code == 403
    assert Client(dashboard_backend).get_state(ids[2]) == "waiting"


def test_cancel_flow_needs_a_reason_and_writes_nothing_without_one(operator_client, dashboard_backend):
    fid, ids = _diamond(dashboard_backend)
    r = operator_client.post(f"/flows/{fid}/cancel", {"cancel-reason": "  "}, HTTP_HX_REQUEST="true")
    assert r.status_code == 400 and 'data-error="reason"' in r.content.decode()
    assert Flows(dashboard_backend).get(fid).core["public_flow_state"] == "open"


def test_an_operator_cancels_a_flow_and_it_is_audited(operator_client, dashboard_backend):
    fid, ids = _diamond(dashboard_backend)
    r = operator_client.post(f"/flows/{fid}/cancel", {"cancel-reason": "bad input data"}, HTTP_HX_REQUEST="true")
    assert r.status_code == 200 and "cancelling its 4 members" in r.content.decode()
    from tests.ffcore.flowkit import wait_until

    wait_until(lambda: Client(dashboard_backend).get_state(ids[2]) == "cancelled")
    assert Client(dashboard_backend).get_state(ids[0]) == "completed"
    again = operator_client.post(f"/flows/{fid}/cancel", {"cancel-reason": "twice"})
    assert again.status_code == 200 and "already cancelled" in again.content.decode()
    entries = [e for e in audit.recent(dashboard_backend) if e.action == "cancel_flow"]
    assert [(e.target, e.reason, e.outcome) for e in entries] == [(fid, "twice", "ok"), (fid, "bad input data", "ok")]


def test_the_execution_page_links_to_its_flow_with_upstream_and_downstream(viewer_client, dashboard_backend):
    fid, ids = _diamond(dashboard_backend)
    body = viewer_client.get(f"/executions/{ids[1]}/").content.decode()
    assert f'href="/flows/{fid}/"' in body
    up = body.split('id="flow-upstream"')[1].split("</table>")[0]
    down = body.split('id="flow-downstream"')[1].split("</table>")[0]
    assert ids[0] in up and "satisfied" in up
    assert ids[3] in down and "impossible" in down
    solo = Client(dashboard_backend).create(kind="solo").execution_id
    assert 'id="flow-section"' not in viewer_client.get(f"/executions/{solo}/").content.decode()
    assert ExecKeys(solo)


def _reference_focus(g, start: str, hops: int) -> tuple[set[str], dict[str, str]]:
    """The focus view's node set and group labels computed from the whole graph (what a lazy read must match)."""
    from dashboard.selectors.flows import _INTEREST, FANOUT_CAP, group_label

    state = {n.eid: n.state for n in g.nodes}
    keep, frontier, groups = {start}, [start], {}
    for _ in range(hops):
        nxt = []
        for node in frontier:
            for direction, nbrs in (("down", [e.downstream for e in g.edges if e.upstream == node]),
                                    ("up", [e.upstream for e in g.edges if e.downstream == node])):
                fresh = sorted({x for x in nbrs if x not in keep}, key=lambda x: (_INTEREST.get(state[x], 9), x))
                keep.update(fresh[:FANOUT_CAP])
                nxt += fresh[:FANOUT_CAP]
                rest = fresh[FANOUT_CAP:]
                if rest:
                    groups[f"group:{node}:{direction}"] = group_label(state[x] for x in rest)
        frontier = nxt
    return keep, groups


def test_focus_mode_reads_only_around_the_focus_yet_draws_what_the_whole_graph_says(
        viewer_client, dashboard_backend, monkeypatch):
    import random

    from dashboard.selectors import flows as sel
    from ffcore.flows.reads import read_flow

    monkeypatch.setattr(sel, "FOCUS_THRESHOLD", 10)
    rnd = random.Random(7)
    flows = Flows(dashboard_backend)
    fid = flows.create(kind="random")
    n = 60
    edges = sorted({(rnd.randrange(0, j), j) for j in range(1, n) for _ in range(rnd.choice((1, 2, 3)))}
                   | {(0, j) for j in range(1, n, 2)})
    ids = flows.build(fid, [{"kind": f"k{i}"} for i in range(n)], edges=edges)
    f = claim(dashboard_backend, ids[0])
    complete(dashboard_backend, ids[0], f)
    resolve_outgoing(dashboard_backend, [(ids[0], fid, "success")])
    whole = read_flow(dashboard_backend, fid)
    for focus, hops in ((ids[0], 1), (ids[0], 2), (ids[n // 2], 2), (ids[-1], 3)):
        data = viewer_client.get(f"/flows/{fid}/graph.json?focus={focus}&hops={hops}").json()
        keep, groups = _reference_focus(whole, focus, hops)
        assert data["focus"] == focus
        assert {x["id"] for x in data["nodes"] if x["state"] != "group"} == keep
        assert {x["id"]: x["label"] for x in data["nodes"] if x["state"] == "group"} == groups
        assert {x["id"]: (x["from"], x["to"], x["state"]) for x in data["edges"] if x["state"] != "group"} == {
            e.edge_id: (e.upstream, e.downstream, e.state or "pending") for e in whole.edges
            if e.upstream in keep and e.downstream in keep}
        states = viewer_client.get(f"/flows/{fid}/states.json?focus={focus}&hops={hops}").json()
        assert set(states["nodes"]) == keep and states["groups"] == groups
        assert states["counts"] == whole.counts and states["revision"] == whole.revision
    assert viewer_client.get(f"/flows/{fid}/states.json?hops=0").status_code == 400


def test_the_member_list_is_paged_and_filtered_by_state_on_the_server(viewer_client, dashboard_backend):
    from urllib.parse import quote

    from dashboard.selectors.flows import MEMBERS_PER_PAGE

    flows = Flows(dashboard_backend)
    fid = flows.create(kind="wide")
    n = MEMBERS_PER_PAGE + 30
    ids = flows.build(fid, [{"kind": "root"}] + [{"kind": "leaf"} for _ in range(n - 1)],
                      edges=[(0, i) for i in range(1, n)])
    rows = '<tr><td class="mono"><a href="/executions/'
    first = viewer_client.get(f"/flows/{fid}/").content.decode()
    assert first.count(rows) == MEMBERS_PER_PAGE and "page 1 of 2" in first
    assert 'rel="next"' in first and 'rel="prev"' not in first
    second = viewer_client.get(f"/flows/{fid}/?mpage=2").content.decode()
    assert second.count(rows) == 30 and 'rel="prev"' in second
    href = {e: f"{rows}{quote(e, safe=':')}/" for e in map(str, ids)}
    assert {e for e, h in href.items() if h in first or h in second} == set(href)
    waiting = viewer_client.get(f"/flows/{fid}/?mstate=waiting").content.decode()
    assert waiting.count(rows) == 1 and href[str(ids[0])] in waiting
    beyond = viewer_client.get(f"/flows/{fid}/?mpage=99")
    assert beyond.status_code == 200 and beyond.content.decode().count(rows) == 30  # the last page
    for query, field in (("mstate=nonsense", "mstate"), ("mpage=0", "mpage"), ("mpage=two", "mpage")):
        bad = viewer_client.get(f"/flows/{fid}/?{query}")
        assert bad.status_code == 400 and f'data-error="{field}"' in bad.content.decode()


def test_a_big_flow_not_yet_summarised_is_listed_with_its_size_and_no_counts(viewer_client, dashboard_backend,
                                                                              monkeypatch):
    from ffcore.flows import reads as flow_reads

    monkeypatch.setattr(flow_reads, "LIVE_COUNT_LIMIT", 3)
    flows = Flows(dashboard_backend)
    big = flows.create(kind="big")
    flows.build(big, [{"kind": "x"} for _ in range(5)])
    small = flows.create(kind="small")
    flows.build(small, [{"kind": "x"}])
    r = viewer_client.get("/flows/")
    body = r.content.decode()
    assert r.status_code == 200
    row = body.split(f'data-href="/flows/{big}/"')[1].split("</tr>")[0]
    assert '<td class="num">5</td>' in row and "not counted yet" in row
    assert "1 waiting" in body.split(f'data-href="/flows/{small}/"')[1].split("</tr>")[0]


def test_a_group_label_names_cancelled_and_skipped_members_as_such_not_as_failures():
    from dashboard.selectors.flows import GROUP_LABEL_MAX, group_label

    assert group_label(["cancelled"] * 11) == "+11: 11 cancelled"
    assert group_label(["completed"] * 3 + ["skipped"] * 8 + ["waiting"]) == "+12: 3 done · 8 skipped · 1 other"
    assert len(group_label(["completed", "failed", "cancelled", "skipped", "expired", "active", "x"] * 999)) \
        <= GROUP_LABEL_MAX
