"""ff_create_execution through Client.create and the raw FCALL: states, indexes, dedup, validation."""

import json

import pytest

from ffcore import functions as F
from ffcore import keys
from ffcore.errors import InvalidInput
from ffcore.execution.client import Client
from ffcore.ids import ExecutionId
from ffcore.keys import ExecKeys
from ffcore.partition import lane_partition
from ffcore.policy import Policy
from tests.pubsub_support import confirmed_pubsub

from .invariants import LANE, check, core, create, raises, zscore


def test_it_creates_a_waiting_execution_in_the_eligible_set(backend):
    before = backend.now_ms()
    eid = create(backend, payload=b'{"x":1}', tags={"team": "a"}, priority=5)
    c = check(backend, eid)
    k = ExecKeys(eid)
    assert c["lifecycle_phase"] == "runnable"
    assert c["ownership_state"] == "unowned"
    assert c["eligibility_state"] == "eligible_now"
    assert c["blocking_reason"] == "waiting_for_worker"
    assert c["attempt_state"] == "pending_first_attempt"
    assert c["public_state"] == "waiting"
    assert c["total_attempt_count"] == "0" and c["current_lease_epoch"] == "0"
    assert c["current_attempt_index"] == "" and c["delay_until"] == ""
    assert c["current_lane"] == LANE and c["priority"] == "5"
    assert int(c["created_at"]) >= before
    assert zscore(backend, k.lane(LANE).eligible, eid) == -5 * 1_000_000_000_000 + int(c["created_at"])
    assert backend.client.get(k.payload) == b'{"x":1}'
    assert backend.client.hgetall(k.tags) == {b"team": b"a"}
    assert eid.partition_index == lane_partition(LANE, backend.settings.partitions.flow)


def test_it_returns_the_public_state_in_the_reply(backend):
    res = Client(backend).create(kind="job")
    assert res.public_state == "waiting" and not res.duplicate
    check(backend, res.execution_id)


def test_it_creates_a_delayed_execution_in_the_delayed_set(backend):
    until = backend.now_ms() + 60_000
    res = Client(backend).create(kind="job", delay_until=until)
    assert res.public_state == "delayed"
    c = check(backend, res.execution_id)
    assert c["eligibility_state"] == "not_eligible_until_time"
    assert c["blocking_reason"] == "waiting_for_delay"
    assert c["blocking_detail"] == f"delayed until {until}"
    assert c["delay_until"] == str(until)
    assert zscore(backend, ExecKeys(res.execution_id).lane(LANE).delayed, res.execution_id) == until


def test_a_delay_that_is_already_due_creates_a_waiting_execution(backend):
    res = Client(backend).create(kind="job", delay_until=backend.now_ms() - 1000)
    assert res.public_state == "waiting"
    c = check(backend, res.execution_id)  # in L:eligible, not stranded in L:delayed
    assert c["delay_until"] == ""


def test_it_clamps_priority_to_the_allowed_range(backend):
    hi = create(backend, priority=99_999)
    lo = create(backend, priority=-7)
    assert check(backend, hi)["priority"] == "9000"
    assert check(backend, lo)["priority"] == "0"


def test_it_rejects_a_non_numeric_priority(backend):
    eid = ExecutionId.mint(3)
    call = F.create_execution(ExecKeys(eid), namespace="n", lane=LANE, kind="job", priority=0, creator="t")
    call.args[4] = "high"
    err = raises("invalid_input", lambda: backend.call(call))
    assert "priority must be a number" in err.details[0]
    assert not backend.client.exists(ExecKeys(eid).core)


def test_a_duplicate_idempotency_key_returns_the_first_execution(backend):
    client = Client(backend)
    first = client.create(kind="job", idempotency_key="order-42")
    second = client.create(kind="job", idempotency_key="order-42")
    assert second.duplicate and second.execution_id == first.execution_id
    check(backend, first.execution_id)
    k = ExecKeys(first.execution_id)
    assert backend.client.zcard(k.lane(LANE).eligible) == 1
    assert backend.client.scard(k.idx.all_executions) == 1
    ttl = backend.client.pttl(k.idx.idempotency("default", "order-42"))
    assert 0 < ttl <= 86_400_000


def test_the_same_idempotency_key_in_another_namespace_is_a_new_execution(backend):
    client = Client(backend)
    a = client.create(kind="job", idempotency_key="k", namespace="a")
    b = client.create(kind="job", idempotency_key="k", namespace="b")
    assert not b.duplicate and a.execution_id != b.execution_id
    check(backend, a.execution_id)
    check(backend, b.execution_id)


def test_creating_an_existing_execution_id_is_a_duplicate_without_writes(backend):
    eid = create(backend, priority=1)
    before = core(backend, eid)
    again = Client(backend).create(kind="other", execution_id=eid, priority=7)
    assert again.duplicate and again.execution_id == eid
    assert core(backend, eid) == before
    check(backend, eid)


def test_it_stores_the_policy_and_sorted_required_capabilities(backend):
    eid = create(backend, policy=Policy(required_capabilities=("gpu", "arm64"), max_replay_count=2))
    c = check(backend, eid)
    assert c["required_capabilities"] == "arm64,gpu"
    stored = json.loads(backend.client.get(ExecKeys(eid).policy))
    assert stored["max_replay_count"] == 2


def test_it_records_the_execution_deadline(backend):
    at = backend.now_ms() + 60_000
    eid = create(backend, deadline_at=at)
    check(backend, eid)
    assert zscore(backend, ExecKeys(eid).idx.execution_deadline, eid) == at


def test_create_many_creates_every_execution(backend):
    results = Client(backend).create_many([{"kind": "a"}, {"kind": "b", "delay_until": backend.now_ms() + 60_000}])
    assert [r.public_state for r in results] == ["waiting", "delayed"]
    for r in results:
        check(backend, r.execution_id)


def _raw_create(backend, policy_json: str):
    eid = ExecutionId.mint(5)
    call = F.create_execution(ExecKeys(eid), namespace="n", lane=LANE, kind="job", priority=0, creator="t",
                              policy_json=policy_json)
    return eid, (lambda: backend.call(call))


@pytest.mark.parametrize(("policy_json", "code", "detail"), [
    ("{not json", "invalid_policy_json", "malformed"),
    ('{"routing_requirements":5}', "invalid_policy_json", "routing_requirements:not_object"),
    ('{"routing_requirements":{"required_capabilities":"gpu"}}', "invalid_capabilities", "required:not_array"),
    ('{"routing_requirements":{"required_capabilities":[1]}}', "invalid_capabilities", "required:non_string_token"),
    ('{"routing_requirements":{"required_capabilities":[""]}}', "invalid_capabilities", "required:empty_token"),
    ('{"routing_requirements":{"required_capabilities":["a,b"]}}', "invalid_capabilities",
     "required:comma_in_token"),
    ('{"routing_requirements":{"required_capabilities":["a b"]}}', "invalid_capabilities",
     "required:control_or_whitespace"),
    (json.dumps({"routing_requirements": {"required_capabilities": [f"c{i}" for i in range(257)]}}),
     "invalid_capabilities", "required:too_many_tokens"),
    (json.dumps({"routing_requirements": {"required_capabilities": ["x" * 2100, "y" * 2100]}}),
     "invalid_capabilities", "required:too_many_bytes"),
])
def test_it_rejects_a_bad_policy_without_writing(backend, policy_json, code, detail):
    eid, run = _raw_create(backend, policy_json)
    err = raises(code, run)
    assert err.details == [detail]
    assert not backend.client.exists(ExecKeys(eid).core)
    assert backend.client.zcard(ExecKeys(eid).lane(LANE).eligible) == 0


def test_it_treats_null_routing_requirements_as_absent(backend):
    eid, run = _raw_create(backend, '{"routing_requirements":null}')
    assert run().fields == [eid, "waiting"]
    backend.client.sadd(keys.LANES_INDEX, LANE)
    check(backend, eid)


def test_the_client_rejects_bad_arguments_before_calling(backend):
    client = Client(backend)
    with pytest.raises(InvalidInput):
        client.create(kind="")
    with pytest.raises(InvalidInput):
        client.create(kind="job", lane="a:b")
    with pytest.raises(InvalidInput):
        client.create(kind="job", priority="1")
    assert backend.client.dbsize() <= 1  # only the partition config


def test_a_delay_that_lapses_between_the_clock_read_and_the_create_is_repaired(backend, monkeypatch):
    real_now = backend.now_ms()
    monkeypatch.setattr(backend, "now_ms", lambda: real_now - 5_000)  # the client's view lags the server
    res = Client(backend).create(kind="job", delay_until=real_now - 1_000)
    monkeypatch.undo()
    assert res.public_state == "waiting"
    check(backend, res.execution_id)  # moved out of L:delayed into L:eligible


def test_a_plain_batch_is_indexed_registered_and_announced_without_reading_the_server_clock(backend, monkeypatch):
    c = Client(backend)

    def no_clock() -> int:
        raise AssertionError("the plain path must not read the server clock")

    monkeypatch.setattr(backend, "now_ms", no_clock)
    ps = confirmed_pubsub(backend.client, keys.lane_wake("plain"))
    try:
        made = c.create_many([{"kind": "k", "lane": "plain", "payload": str(i)} for i in range(3)])
        msg = ps.get_message(timeout=2.0)
    finally:
        ps.close()
    parts = {r.execution_id.partition_index for r in made}
    assert msg is not None and set(map(int, msg["data"].decode().split(","))) == parts
    assert {int(n) for n in backend.client.smembers(keys.lane_partitions("plain"))} == parts
    assert b"plain" in backend.client.smembers(keys.LANES_INDEX)
    for r in made:
        check(backend, r.execution_id)
        assert backend.client.zscore(keys.PartitionKeys(r.execution_id.partition_index).created,
                                     str(r.execution_id)) is not None


def test_a_refused_create_in_a_plain_batch_leaves_no_phantom_in_the_listing_index(backend):
    c = Client(backend)
    with pytest.raises(Exception, match="deadline"):
        c.create_many([{"kind": "k", "lane": "ph", "payload": "ok"},
                       {"kind": "k", "lane": "ph", "payload": "bad", "deadline_at": "soon"}])
    n = lane_partition("ph", backend.settings.partitions.flow)
    listed = [m.decode() for m in backend.client.zrange(keys.PartitionKeys(n).created, 0, -1)]
    assert len(listed) == 1  # the good one, indexed; the refused one's id removed again
    assert core(backend, listed[0])["public_state"] == "waiting"
