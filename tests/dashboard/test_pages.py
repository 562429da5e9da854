"""Every page renders for a viewer; anonymous users are sent to sign in."""

from urllib.parse import unquote

import pytest

from ffcore.execution.client import Client

pytestmark = pytest.mark.django_db

PAGES = ["/", "/executions/", "/workers/", "/audit/", "/system/"]


@pytest.mark.parametrize("url", PAGES + ["/executions/{fp:1}:6ba7b810-9dad-11d1-80b4-00c04fd430c8/"])
def test_anonymous_users_are_redirected_to_sign_in(client, url):
    r = client.get(url)
    assert r.status_code == 302
    assert r["Location"].startswith("/login/?next=")


def test_overview_counts_states_per_lane_and_lists_workers_and_failures(viewer_client, seed):
    html = viewer_client.get("/").content.decode()
    # default lane: 1 waiting, 2 released back (delayed until promoted); gpu: 1 active.
    assert 'data-lane="default" data-col="0">1<' in html
    assert 'data-lane="default" data-col="1">2<' in html
    assert 'data-lane="gpu" data-col="2">1<' in html
    assert 'data-lane="default" data-col="7">2<' in html  # completed + failed
    assert seed.worker.config.worker_instance_id in html
    assert seed.failed in html


def test_overview_live_workers_lead_with_the_worker_name_as_the_workers_page_does(viewer_client, seed):
    html = viewer_client.get("/").content.decode()
    wiid = seed.worker.config.worker_instance_id
    row = html[html.index(f'href="/workers/#{wiid}"'):]
    assert row.index("<strong>w-test</strong>") < row.index(f'<span class="mono muted">{wiid}</span>')


def test_executions_list_is_newest_first_with_columns(viewer_client, seed):
    html = viewer_client.get("/executions/").content.decode()
    order = [seed.waiting, seed.active, seed.failed, seed.completed]
    positions = [html.index(e) for e in order]
    assert positions == sorted(positions)
    assert "6 stored" in html
    assert 's-active">active' in html


@pytest.mark.parametrize(("query", "present", "absent"), [
    ("state=completed", "completed", "waiting"),
    ("lane=gpu", "active", "completed"),
    ("kind=long", "active", "completed"),
    ("tag=team%3Dblue", "completed", "active"),
])
def test_executions_list_filters(viewer_client, seed, query, present, absent):
    html = viewer_client.get(f"/executions/?{query}").content.decode()
    assert getattr(seed, present) in html
    assert getattr(seed, absent) not in html


def test_executions_list_pages_with_a_cursor(viewer_client, seed):
    first = viewer_client.get("/executions/?limit=2")
    html = first.content.decode()
    assert html.count('<tr data-href="/executions/') == 2
    nxt = html.split('id="more"')[1].split('hx-get="?')[1].split('"')[0].replace("&amp;", "&")
    second = viewer_client.get("/executions/?" + nxt, HTTP_HX_REQUEST="true").content.decode()
    assert second.count('<tr data-href="/executions/') == 2
    assert "<html" not in second  # the rows partial only
    assert seed.waiting in html and seed.waiting not in second


@pytest.mark.parametrize(("query", "field"), [("state=bogus", "state"), ("tag=novalue", "tag"),
                                              ("limit=0", "limit"), ("cursor=zzz", "cursor"), ("id=nope", "id")])
def test_bad_filters_show_an_error_next_to_the_field(viewer_client, seed, query, field):
    r = viewer_client.get(f"/executions/?{query}")
    assert r.status_code == 400
    assert f'data-error="{field}"' in r.content.decode()


def test_jump_to_an_id_opens_the_execution(viewer_client, seed):
    r = viewer_client.get(f"/executions/?id={seed.completed}")
    assert r.status_code == 302
    assert unquote(r["Location"]) == f"/executions/{seed.completed}/"


def test_execution_detail_shows_vector_why_attempts_and_values(viewer_client, seed):
    html = viewer_client.get(f"/executions/{seed.completed}/").content.decode()
    for dim in ("lifecycle phase", "ownership", "eligibility", "blocking reason", "terminal outcome",
                "attempt state", "public state"):
        assert dim in html
    assert "Finished successfully" in html
    assert "ended success" in html  # attempts table outcome
    assert 'data-kind="json"' in html and "user:" in html  # JSON tree of the input
    assert "team" in html and "blue" in html


def test_execution_detail_says_who_holds_the_lease(viewer_client, seed):
    html = viewer_client.get(f"/executions/{seed.active}/").content.decode()
    assert "Running: leased by worker w-test" in html
    assert 'class="countdown"' in html


def test_binary_input_is_shown_as_hex(viewer_client, seed):
    html = viewer_client.get(f"/executions/{seed.binary}/").content.decode()
    assert 'data-kind="hex"' in html
    assert "00000000  00 01 02 03" in html


def test_script_input_is_escaped(viewer_client, seed):
    html = viewer_client.get(f"/executions/{seed.xss}/").content.decode()
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_unknown_and_malformed_ids_are_404(viewer_client, seed):
    assert viewer_client.get("/executions/{fp:1}:6ba7b810-9dad-11d1-80b4-00c04fd430c8/").status_code == 404
    assert viewer_client.get("/executions/not-an-id/").status_code == 404


def test_workers_page_lists_the_live_worker_and_its_leases(viewer_client, seed):
    html = viewer_client.get("/workers/").content.decode()
    assert seed.worker.config.worker_instance_id in html
    assert "default, gpu" in html
    assert seed.active in html


def test_viewer_sees_no_action_forms(viewer_client, seed):
    html = viewer_client.get(f"/executions/{seed.waiting}/").content.decode()
    assert 'id="action-cancel"' not in html


def test_operator_sees_action_forms(operator_client, seed):
    html = operator_client.get(f"/executions/{seed.waiting}/").content.decode()
    assert 'id="action-cancel"' in html and 'id="action-priority"' in html


def test_the_list_is_fast_to_count_without_iterating(viewer_client, seed, dashboard_backend):
    Client(dashboard_backend).create_many([{"kind": "bulk"} for _ in range(30)])
    html = viewer_client.get("/executions/").content.decode()
    assert "36 stored" in html
