"""REST accepts v0.13's forms next to today's (#39 item 8): stream reads take the cursor words `start` / `end` as
well as `-` / `+`; a claim grant carries v0.13's opaque `partition_key` next to `partition_family` /
`partition_index`, and a grant in either form is claimed by the worker."""

from __future__ import annotations

import pytest

from ffcore.execution.client import Client
from ffcore.keys import PartitionKeys
from ffcore.worker.grant_claim import SchedulerError, grant_from_json
from tests.ffcore.suspension_support import claimed

from .helpers import post

pytestmark = pytest.mark.django_db


def _ids(client, base: str, query: str) -> list[str]:
    r = client.get(f"{base}?{query}")
    assert r.status_code == 200, r.content
    return [f["id"] for f in r.json()["frames"]]


def test_stream_reads_take_start_and_end_as_well_as_the_bare_markers(client, dashboard_backend):
    task = claimed(dashboard_backend)
    for p in (b"a", b"b", b"c"):
        task.append_frame("log", p)
    base = f"/v1/executions/{task.execution_id}/attempts/{task.attempt_index}/stream"
    everything = _ids(client, base, "from=-&to=%2B")
    assert len(everything) == 3
    assert _ids(client, base, "from=start&to=end") == everything
    assert _ids(client, base, f"from={everything[1]}&to=end") == everything[1:]
    assert _ids(client, base, f"from=start&to={everything[1]}") == everything[:2]
    r = client.get(f"{base}?from=beginning")
    assert r.status_code == 422 and "from" in r.json()["error"]


def test_a_claim_grant_carries_the_opaque_partition_key_next_to_family_and_index(client, dashboard_backend):
    eid = Client(dashboard_backend).create(kind="job", lane="v013").execution_id
    r = post(client, "/v1/workers/w-013/claim", {"lane_id": "v013", "worker_instance_id": "wi-013",
                                                 "grant_ttl_ms": 5000})
    assert r.status_code == 200, r.content
    grant = r.json()
    assert grant["execution_id"] == eid
    assert (grant["partition_family"], grant["partition_index"]) == ("execution", eid.partition_index)
    assert grant["partition_key"] == PartitionKeys(eid.partition_index).tag == eid.split("}", 1)[0] + "}"


def test_a_grant_in_either_form_is_read_and_one_naming_another_partition_is_refused():
    eid = "{fp:7}:6ba7b810-9dad-41d1-80b4-00c04fd430c8"
    common = {"execution_id": eid, "grant_key": "k", "expires_at_ms": 1}
    v013 = grant_from_json({**common, "partition_key": "{fp:7}"})
    v020 = grant_from_json({**common, "partition_family": "execution", "partition_index": 7})
    assert v013 == v020 and v013.partition_index == 7
    for bad in ({"partition_key": "{fp:8}"}, {"partition_index": 8}):
        with pytest.raises(SchedulerError, match="disagrees"):
            grant_from_json({**common, **bad})
