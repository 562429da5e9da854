"""Suspend conditions in words on the waitpoints inbox and the execution page (#24 item 2): any-of,
N of M, all-of, and a composite over several waitpoints. One world, rendered server-side."""

from __future__ import annotations

import re

import pytest

from ffcore.suspension import hmac_secrets
from ffcore.suspension.conditions import AllOf, any_of, quorum, wait_on
from tests.ffcore.suspension_support import SECRET, claimed, signal

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(dashboard_backend):
    hmac_secrets.install(dashboard_backend, SECRET)
    out = {}
    t = claimed(dashboard_backend, kind="words")
    out["any"] = (t.execution_id, t.suspend(any_of("approve", "reject")).waitpoint_id)
    t = claimed(dashboard_backend, kind="words")
    q = t.suspend(quorum(2, of=3, name="approve"))
    signal(dashboard_backend, t.execution_id, q.waitpoint_id, q.token, "approve")
    out["quorum"] = (t.execution_id, q.waitpoint_id)
    t = claimed(dashboard_backend, kind="words")
    out["all"] = (t.execution_id, t.suspend(["legal", "finance"]).waitpoint_id)
    t = claimed(dashboard_backend, kind="words")
    c = t.suspend(AllOf(wait_on("legal-desk", "ok"), wait_on("finance-desk", any_of("ok", "waive"))))
    signal(dashboard_backend, t.execution_id, c.waitpoint_id, c.token, "ok")
    out["composite"] = (t.execution_id, c.waitpoint_id)
    return out


def _cell(html: str, wid: str) -> str:
    row = re.search(rf'<tr id="wp-{wid}".*?</tr>', html, re.S)
    assert row, wid
    cell = re.search(r'<td class="condition">(.*?)</td>', row.group(0), re.S)
    assert cell, row.group(0)
    return re.sub(r"\s+", " ", cell.group(1)).strip()


def test_the_inbox_says_each_condition_in_words(viewer_client, world):
    html = viewer_client.get("/waitpoints/?kind=words").content.decode()
    assert _cell(html, world["any"][1]) == "any of approve, reject"
    assert _cell(html, world["quorum"][1]) == "2 of 3 approvers: approve"
    assert _cell(html, world["all"][1]) == "all of legal, finance"
    assert _cell(html, world["composite"][1]) == "all of (ok on legal-desk; any of ok, waive on finance-desk)"
    # the composite's leaf that already got its signal is ticked among the expected names
    row = re.search(rf'<tr id="wp-{world["composite"][1]}".*?</tr>', html, re.S).group(0)
    assert '<span class="sig ok">ok ✓</span>' in row


def test_the_execution_page_says_the_condition_in_words(viewer_client, world):
    for key, words in (("quorum", "2 of 3 approvers: approve"), ("any", "any of approve, reject"),
                       ("composite", "all of (ok on legal-desk; any of ok, waive on finance-desk)")):
        html = viewer_client.get(f"/executions/{world[key][0]}/").content.decode()
        m = re.search(r'<span class="condition-words">(.*?)</span>', html, re.S)
        assert m and m.group(1).strip() == words, key
    html = viewer_client.get(f"/executions/{world['composite'][0]}/").content.decode()
    assert 'data-matcher="ok on legal-desk"' in html and 'data-matcher="waive on finance-desk"' in html


def test_an_operator_signals_a_composites_other_waitpoint_from_the_execution_page(operator_client, world,
                                                                                 dashboard_backend):
    eid, _ = world["composite"]
    html = operator_client.get(f"/executions/{eid}/").content.decode()
    other = re.search(r'<tr data-waitpoint="([0-9a-f-]+)"><td class="mono">finance-desk', html)
    assert other, "the other waitpoint is listed"
    wid = other.group(1)
    r = operator_client.post(f"/waitpoints/{eid}/{wid}/signal",
                             {"name": "waive", "payload": "", "reason": "waived by phone", "idempotency_key": ""},
                             HTTP_HX_REQUEST="true")
    assert r.status_code == 200, r.content
    from tests.ffcore.suspension_support import core
    assert core(dashboard_backend, eid)["public_state"] == "waiting"  # both members satisfied: resumed
