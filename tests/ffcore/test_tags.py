"""Tags after create (#24 item 4): ff_set_execution_tags / ff_set_flow_tags through Client / Flows."""

from __future__ import annotations

import pytest

from ffcore import functions as F
from ffcore.errors import ERRORS, InvalidInput
from ffcore.execution.client import Client
from ffcore.flows.flows import Flows
from ffcore.flows.tags import read_flow_tags
from ffcore.ids import ExecutionId, new_uuid
from ffcore.keys import ExecKeys
from ffcore.reads import decode_map

from .invariants import create, raises

InvalidTagKey = ERRORS["invalid_tag_key"]


def _tags(backend, eid):
    return decode_map(backend.client.hgetall(ExecKeys(eid).tags))


def test_it_adds_and_overwrites_execution_tags_and_keeps_create_time_ones(backend):
    eid = create(backend, tags={"team": "ml"})
    before = int(backend.client.hget(ExecKeys(eid).core, "last_mutation_at") or 0)
    assert Client(backend).set_tags(eid, {"ops.owner": "ana", "ops.ticket": "T-1"}) == 2
    assert Client(backend).set_tags(eid, {"ops.owner": "bo"}) == 1
    assert _tags(backend, eid) == {"team": "ml", "ops.owner": "bo", "ops.ticket": "T-1"}
    assert int(backend.client.hget(ExecKeys(eid).core, "last_mutation_at")) >= before


@pytest.mark.parametrize("key", ["owner", "Ops.owner", "1ops.x", "ops.", "ops..x", "op-s.x", ".x", ""])
def test_a_bad_tag_key_is_refused_by_name_and_nothing_is_written(backend, key):
    eid = create(backend)
    with pytest.raises(InvalidTagKey) as info:
        Client(backend).set_tags(eid, {"ops.fine": "1", key: "v"})
    assert info.value.details == [key]
    assert _tags(backend, eid) == {}


def test_the_library_itself_checks_every_key_before_writing(backend):
    eid = create(backend)
    k = ExecKeys(eid)
    err = raises("invalid_tag_key", lambda: backend.call(F.set_execution_tags(k, [("ops.a", "1"), ("bad", "2")])))
    assert err.details == ["bad"]
    raises("invalid_input", lambda: backend.call(F.Call("ff_set_execution_tags", [k.core, k.tags], ["ops.a"])))
    raises("invalid_input", lambda: backend.call(F.Call("ff_set_execution_tags", [k.core, k.tags], [])))
    assert _tags(backend, eid) == {}
    ghost = ExecKeys(ExecutionId.mint(3))
    raises("execution_not_found", lambda: backend.call(F.set_execution_tags(ghost, [("ops.a", "1")])))
    assert not backend.client.exists(ghost.tags)


@pytest.mark.parametrize("tags, message", [
    ({}, "at least one"),
    ({"ops.v": "x" * 5000}, "ops.v"),
    ({f"ops.k{i}": "v" for i in range(65)}, "at most 64"),
])
def test_empty_oversized_or_too_many_tags_are_invalid_input(backend, tags, message):
    eid = create(backend)
    with pytest.raises(InvalidInput, match=message):
        Client(backend).set_tags(eid, tags)
    assert _tags(backend, eid) == {}


def test_flow_tags_are_written_and_read_back(backend):
    flows = Flows(backend)
    fid = flows.create()
    assert flows.set_tags(fid, {"ops.owner": "ana"}) == 1
    assert read_flow_tags(backend, fid) == {"ops.owner": "ana"}
    assert decode_map(backend.client.hgetall(flows.keys(fid).core))["tags_migrated"] == "1"


def test_the_first_flow_tag_write_migrates_legacy_dotted_fields_off_the_flow_core(backend):
    flows = Flows(backend)
    fid = flows.create()
    core = flows.keys(fid).core
    backend.client.hset(core, mapping={"cairn.tenant": "acme", "cairn.run": "r1"})  # an older writer's fields
    assert read_flow_tags(backend, fid) == {"cairn.run": "r1", "cairn.tenant": "acme"}
    flows.set_tags(fid, {"cairn.run": "r2"})
    fields = decode_map(backend.client.hgetall(core))
    assert "cairn.tenant" not in fields and "cairn.run" not in fields and fields["flow_id"] == fid
    assert read_flow_tags(backend, fid) == {"cairn.run": "r2", "cairn.tenant": "acme"}


def test_flow_tags_on_an_unknown_flow_or_with_a_bad_key_write_nothing(backend):
    flows = Flows(backend)
    ghost = new_uuid()
    raises("flow_not_found", lambda: flows.set_tags(ghost, {"ops.a": "1"}))
    assert not backend.client.exists(flows.keys(ghost).tags)
    fid = flows.create()
    backend.client.hset(flows.keys(fid).core, "cairn.old", "1")
    with pytest.raises(InvalidTagKey):
        backend.call(F.set_flow_tags(flows.keys(fid), [("ops.a", "1"), ("nodot", "2")]))
    fields = decode_map(backend.client.hgetall(flows.keys(fid).core))
    assert fields["cairn.old"] == "1" and "tags_migrated" not in fields  # not even the migration ran
    assert not backend.client.exists(flows.keys(fid).tags)
