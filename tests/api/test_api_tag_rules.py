"""Tag keys checked by one rule at every door (issue #37): create through REST or the Client, a schedule's
template, and `POST …/tags`; an execution holds at most MAX_TAGS, and 5,000 tags are a clear 400 that
writes nothing (it was a Lua "too many results to unpack")."""

from __future__ import annotations

import pytest

from ffcore import keys
from ffcore.errors import InvalidInput
from ffcore.execution.client import Client
from ffcore.execution.tags import MAX_TAGS
from tests.api.helpers import post
from tests.keyspace import keyspace

pytestmark = pytest.mark.django_db

BAD_KEYS = ["", "Team", "a b", "<script>", "x" * 200, "team..x", "9lives"]


def _unchanged(backend, before) -> bool:
    """Nothing but the audit entry of the refusal was written."""
    audit = keys.AUDIT_STREAM.encode() if isinstance(keys.AUDIT_STREAM, str) else keys.AUDIT_STREAM
    after = keyspace(backend)
    return {k: v for k, v in after.items() if k != audit} == {k: v for k, v in before.items() if k != audit}


def _create(client, tags):
    return post(client, "/v1/executions", {"namespace": "default", "lane_id": "default", "execution_kind": "k",
                                           "tags": tags})


@pytest.mark.parametrize("key", BAD_KEYS)
def test_create_refuses_the_tag_keys_the_tags_route_refuses(client, dashboard_backend, key):
    before = keyspace(dashboard_backend)
    r = _create(client, {key: "v"})
    assert r.status_code == 400 and "tags" in r.json()["error"], r.content
    assert _unchanged(dashboard_backend, before)
    with pytest.raises(InvalidInput):
        Client(dashboard_backend).create(kind="k", tags={key: "v"})


def test_five_thousand_tags_at_create_are_a_clear_400_that_writes_nothing(client, dashboard_backend):
    before = keyspace(dashboard_backend)
    r = _create(client, {f"app.t{i}": "v" for i in range(5000)})
    assert r.status_code == 400
    assert f"at most {MAX_TAGS} per execution" in r.json()["error"] and "unpack" not in r.json()["error"]
    assert _unchanged(dashboard_backend, before)


def test_engine_style_and_caller_keys_are_still_accepted_at_create(client, dashboard_backend):
    r = _create(client, {"team": "ml", "app.owner": "ana"})
    assert r.status_code == 201, r.content


def test_tags_added_later_cannot_grow_an_execution_past_the_cap(client, dashboard_backend):
    eid = Client(dashboard_backend).create(kind="k", tags={f"app.t{i}": "v" for i in range(MAX_TAGS - 1)}).execution_id
    r = post(client, f"/v1/executions/{eid}/tags", {"tags": {"app.x": "1", "app.y": "2"}, "reason": "more"})
    assert r.status_code == 400 and "per execution" in r.json()["error"]
    assert len(client.get(f"/v1/executions/{eid}/tags").json()["tags"]) == MAX_TAGS - 1
    ok = post(client, f"/v1/executions/{eid}/tags", {"tags": {"app.t0": "new", "app.x": "1"}, "reason": "fits"})
    assert ok.status_code == 200, ok.content


def test_a_schedule_template_with_a_bad_tag_key_is_refused_naming_the_field(client, dashboard_backend):
    body = {"name": "s1", "spec": {"cron": "0 9 * * 1", "timezone": "UTC"}, "reason": "r",
            "template": {"kind": "k", "tags": {"a b": "v"}}}
    r = post(client, "/v1/schedules", body)
    assert r.status_code in (400, 422) and "template.tags" in r.content.decode(), r.content
