"""The audit page (#25 item 5): a bulk job is one row; filters by actor, action, target and time."""

import re
import uuid

import pytest

from ffcore import audit
from ffcore.execution.client import Client

pytestmark = pytest.mark.django_db


def _bulk_entries(backend, job, eids, refused=()):
    audit.record_many(backend, [{"actor": "otto", "action": "bulk_cancel", "target": e, "reason": "cleanup",
                                 "outcome": "refused: execution_not_active" if e in refused else "ok",
                                 "detail": f"job {job}"} for e in eids])


def test_a_bulk_job_is_one_row_with_count_outcome_and_its_job_link(operator_client, dashboard_backend):
    b = dashboard_backend
    audit.record(b, actor="vera", action="cancel", target="{fp:1}:x", reason="before", outcome="ok")
    job = str(uuid.uuid4())
    eids = [f"{{fp:2}}:{uuid.uuid4()}" for _ in range(120)]
    _bulk_entries(b, job, eids, refused=set(eids[:3]))
    audit.record(b, actor="vera", action="replay", target="{fp:1}:y", reason="after", outcome="ok")
    html = operator_client.get("/audit/").content.decode()
    rows = re.findall(r"<tr[ >].*?</tr>", html, re.S)[1:]
    assert len(rows) == 3  # after, the job, before
    job_row = rows[1]
    assert f'href="/executions/bulk/{job}/"' in job_row and "<span data-count>120</span>" in job_row
    assert "117 ok, 3 execution not active" in job_row
    assert "after" in rows[0] and "before" in rows[2]


def test_a_job_split_across_reads_is_still_one_row_and_paging_continues_after_it(operator_client,
                                                                                   dashboard_backend):
    b = dashboard_backend
    for i in range(3):
        audit.record(b, actor="vera", action="cancel", target=f"old-{i}", reason="r", outcome="ok")
    job = str(uuid.uuid4())
    _bulk_entries(b, job, [f"e{i}" for i in range(1500)])  # more than one stream read (1000)
    pg = audit.page(b, audit.AuditFilter(), count=1)
    assert [type(r).__name__ for r in pg.rows] == ["BulkGroup"] and pg.rows[0].count == 1500
    rest = audit.page(b, audit.AuditFilter(), before=pg.next_before)
    assert [r.target for r in rest.rows] == ["old-2", "old-1", "old-0"] and rest.next_before == ""


def test_filters_by_actor_action_target_and_time(operator_client, dashboard_backend):
    b = dashboard_backend
    c = Client(b)
    eid = c.create(kind="k").execution_id
    audit.record(b, actor="vera", action="cancel", target=eid, reason="one", outcome="ok")
    audit.record(b, actor="otto", action="replay", target=eid, reason="two", outcome="ok")
    audit.record(b, actor="otto", action="cancel", target="{fp:9}:other", reason="three", outcome="ok")

    def reasons(qs):
        r = operator_client.get("/audit/?" + qs)
        assert r.status_code == 200
        return re.findall(r"<td>(one|two|three)</td>", r.content.decode())

    assert reasons("actor=otto") == ["three", "two"]
    assert reasons("action=cancel") == ["three", "one"]
    assert reasons("target=" + eid.split(":")[1][:8]) == ["two", "one"]
    assert reasons("actor=otto&action=cancel") == ["three"]
    assert reasons("since=2000-01-01T00:00&until=2001-01-01T00:00") == []
    assert reasons("since=2000-01-01T00:00:00") == ["three", "two", "one"]
    # A target filter lists a bulk job's executions one by one.
    job = str(uuid.uuid4())
    _bulk_entries(dashboard_backend, job, ["{fp:3}:aaa", "{fp:3}:bbb"])
    html = operator_client.get("/audit/?target=bbb").content.decode()
    assert "{fp:3}:bbb" in html and "{fp:3}:aaa" not in html and "bulk-row" not in html


def test_time_filters_follow_the_browsers_zone_and_bad_ones_are_field_errors(operator_client, dashboard_backend):
    r = operator_client.get("/audit/?since=yesterday&until=2026-01-01T00:00&tz=abc")
    html = r.content.decode()
    assert r.status_code == 400
    assert 'data-error="since"' in html and 'data-error="tz"' in html
    r = operator_client.get("/audit/?since=2026-02-01T00:00&until=2026-01-01T00:00")
    assert r.status_code == 400 and 'data-error="until"' in r.content.decode()
    # The window follows the browser's zone offset.
    audit.record(dashboard_backend, actor="vera", action="cancel", target="t", reason="now", outcome="ok")
    ts = audit.recent(dashboard_backend)[0].ts
    from datetime import UTC, datetime, timedelta
    utc = datetime.fromtimestamp(ts / 1000, tz=UTC)
    # A browser two hours ahead of UTC (JS offset -120) writes its local time; the entry is inside [t-1m, t+1m].
    local = (utc + timedelta(hours=2)).replace(tzinfo=None)
    qs = (f"since={(local - timedelta(minutes=1)).isoformat(timespec='seconds')}"
          f"&until={(local + timedelta(minutes=1)).isoformat(timespec='seconds')}")
    assert "<td>now</td>" in operator_client.get(f"/audit/?{qs}&tz=-120").content.decode()
    assert "<td>now</td>" not in operator_client.get(f"/audit/?{qs}&tz=0").content.decode()


def test_the_theme_choice_is_kept_with_the_account_and_refused_values_are_field_errors(operator_client, viewer,
                                                                                       client, dashboard_backend):
    from dashboard.models import UserPreference

    assert 'data-theme-pref="auto"' in operator_client.get("/audit/").content.decode()
    r = operator_client.post("/theme", {"theme": "dark"}, HTTP_HX_REQUEST="true")
    assert r.status_code == 200
    assert 'data-theme-pref="dark"' in operator_client.get("/audit/").content.decode()
    assert UserPreference.objects.get(user__username="otto").theme == "dark"
    r = operator_client.post("/theme", {"theme": "purple"})
    assert r.status_code == 400 and 'data-error="theme"' in r.content.decode()
    assert UserPreference.objects.get(user__username="otto").theme == "dark"
    client.force_login(viewer)  # another user keeps the default
    assert 'data-theme-pref="auto"' in client.get("/audit/").content.decode()


def test_targets_link_to_their_pages_and_the_live_part_keeps_its_filters(operator_client, dashboard_backend):
    fid, bid = "6ba7b810-9dad-41d1-80b4-00c04fd430c8", "1ad0bcfd-1206-5d2c-a465-d7b77d4b30cd"
    for action, target in (("cancel_flow", fid), ("reset_budget", f"budget:{bid}"), ("claim_grant", "lane:gpu jobs"),
                           ("rotate_waitpoint_secret", "kid:k2")):
        audit.record(dashboard_backend, actor="otto", action=action, target=target, reason="r", outcome="ok")
    html = operator_client.get("/audit/").content.decode()
    assert f'<a href="/flows/{fid}/">{fid}</a>' in html and f'<a href="/budgets/{bid}/">budget:{bid}</a>' in html
    assert '<a href="/executions/?lane=gpu+jobs">lane:gpu jobs</a>' in html and "<td class=\"mono\">kid:k2</td>" in html
    # The live part re-renders with its filters.
    audit.record(dashboard_backend, actor="vera", action="cancel", target="t1", reason="mine", outcome="ok")
    audit.record(dashboard_backend, actor="otto", action="cancel", target="t2", reason="theirs", outcome="ok")
    html = operator_client.get("/audit/?actor=vera").content.decode()
    assert 'data-live-url="/audit/?actor=vera"' in html
    r = operator_client.get("/audit/?actor=vera", HTTP_HX_REQUEST="true")
    part = r.content.decode()
    assert "<html" not in part and 'id="audit-live"' in part and "mine" in part and "theirs" not in part
