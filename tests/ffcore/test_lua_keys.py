"""The Lua key builders (`ff_key` in lua/helpers.lua) name every key exactly as ffcore/keys.py does.

A test-only function library, `fftest_keys`, is helpers.lua plus a small wrapper that exposes the builders
through FCALL; it is loaded next to `flowfabric` on the test Valkey and deleted at teardown. Each builder
gets its hash tag the way the library's functions do: `ff_tag_of(KEYS[1])` of a key ffcore built.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterator

import pytest

from ffcore import keys
from ffcore.ids import ExecutionId
from ffcore.keys import LANE_STATE_INDEXES, ExecKeys, FlowKeys, PartitionKeys
from ffcore.library import LUA_DIR, file_order

LIBRARY = "fftest_keys"

# KEYS[1] gives the tag (mode "tag": ff_tag_of(KEYS[1]) comes first) or is itself the first argument
# (mode "key"); mode "none" passes ARGV only. Booleans come back as 1/0, constants by name.
WRAPPER = """
redis.register_function('fftest_key', function(keys, args)
  local fn = ff_key[args[1]]
  local rest = {unpack(args, 3)}
  if args[2] == 'tag' then table.insert(rest, 1, ff_tag_of(keys[1]))
  elseif args[2] == 'key' then table.insert(rest, 1, keys[1]) end
  local v = fn(unpack(rest))
  if type(v) == 'boolean' then return v and 1 or 0 end
  return v
end)
redis.register_function('fftest_key_const', function(keys, args)
  return ff_key[args[1]]
end)
redis.register_function('fftest_tag_of', function(keys, args)
  return ff_tag_of(keys[1])
end)
"""

PARTITIONS = [0, 7, 255, 65535]
UUIDS = ["00000000-0000-4000-8000-000000000000", "9f1c2b3a-4d5e-4f60-8a7b-0c1d2e3f4a5b"]
LANES = ["default", "gpu-lane", "a:b", "with space", "ünïcode"]
WIIDS = ["", "worker-1", "7c9e6679-7425-40de-944b-e07fc1f90ae7"]
ATTEMPTS = [0, 3, 12]


@pytest.fixture
def lua(backend) -> Iterator:
    source = f"#!lua name={LIBRARY}\n" + (LUA_DIR / "helpers.lua").read_text() + WRAPPER
    client = backend.client
    client.function_load(source, replace=True)

    def call(fn: str, key: str | None, *args: object) -> str | int:
        v = client.fcall(fn, 1 if key else 0, *([key] if key else []), *args)
        return v.decode() if isinstance(v, bytes) else v

    try:
        yield call
    finally:
        client.function_delete(LIBRARY)


def executions() -> Iterator[ExecKeys]:
    for n in PARTITIONS:
        for u in UUIDS:
            yield ExecKeys(ExecutionId.mint(n, u))


def test_tag_is_the_first_brace_group_ffcore_puts_there(lua):
    for k in executions():
        for key in (k.core, k.attempt(2), k.stream_meta(1), k.lane("L").eligible, k.idx.lease_expiry):
            assert lua("fftest_tag_of", key) == k.tag


def test_execution_keys(lua):
    names = {
        "core": "core", "payload": "payload", "result": "result", "policy": "policy", "tags": "tags",
        "lease:current": "lease_current", "lease:history": "lease_history", "claim_grant": "claim_grant",
        "attempts": "attempts", "suspension:current": "suspension_current", "waitpoints": "waitpoints",
        "signals": "signals", "deps:meta": "deps_meta", "deps:unresolved": "deps_unresolved",
        "deps:all_edges": "deps_all_edges",
    }
    for k in executions():
        for name, prop in names.items():
            assert lua("fftest_key", k.core, "exec", "tag", k.eid, name) == getattr(k, prop)
        for edge in UUIDS + ["e1"]:
            assert lua("fftest_key", k.core, "exec", "tag", k.eid, "dep", edge) == k.dep_edge(edge)


def test_attempt_and_stream_keys(lua):
    for k in executions():
        for i in ATTEMPTS:
            assert lua("fftest_key", k.core, "attempt", "tag", k.eid, i) == k.attempt(i)
            assert lua("fftest_key", k.core, "attempt", "tag", k.eid, i, "usage") == k.attempt_usage(i)
            assert lua("fftest_key", k.core, "attempt", "tag", k.eid, i, "policy") == k.attempt_policy(i)
            assert lua("fftest_key", k.core, "stream", "tag", k.eid, i) == k.stream(i)
            assert lua("fftest_key", k.core, "stream", "tag", k.eid, i, "meta") == k.stream_meta(i)


def test_lane_and_partition_keys(lua):
    for n in PARTITIONS:
        ix = PartitionKeys(n)
        for lane in LANES:
            lk = ix.lane(lane)
            for suffix in LANE_STATE_INDEXES:
                assert lua("fftest_key", ix.lease_expiry, "lane", "tag", lane, suffix) == lk.index(suffix)
            assert lua("fftest_key", ix.lease_expiry, "lane", "tag", lane, "caps", "a,gpu") == lk.capable("a,gpu")
            assert lua("fftest_key", None, "wake", "none", lane) == keys.lane_wake(lane)
            assert lua("fftest_key", ix.lease_expiry, "lane", "tag", lane, "idle") == lk.idle
        assert lua("fftest_key", ix.lease_expiry, "index", "tag", "lease_expiry") == ix.lease_expiry
        assert lua("fftest_key", ix.lease_expiry, "index", "tag", "attempt_timeout") == ix.attempt_timeout
        for wiid in WIIDS:
            assert lua("fftest_key", ix.lease_expiry, "worker_leases", "tag", wiid) == ix.worker_leases(wiid)
            assert lua("fftest_key", None, "worker_wake", "none", wiid) == keys.worker_wake(wiid)


def test_flow_keys(lua):
    for n in PARTITIONS:
        for flow_id in UUIDS:
            fk = FlowKeys(n, flow_id)
            eid = ExecutionId.mint(n, UUIDS[1])
            assert lua("fftest_key", fk.core, "flow", "tag", flow_id, "core") == fk.core
            assert lua("fftest_key", fk.core, "flow", "tag", flow_id, "members") == fk.members
            assert lua("fftest_key", fk.core, "flow", "tag", flow_id, "out", eid) == fk.outgoing(eid)
            assert lua("fftest_key", fk.core, "flow", "tag", flow_id, "in", eid) == fk.incoming(eid)
            assert lua("fftest_key", fk.core, "flow", "tag", flow_id, "edge", "e-1") == fk.edge("e-1")
            assert lua("fftest_key", fk.core, "flow", "tag", flow_id, "grant", "m-1") == fk.grant("m-1")


def test_keys_derived_from_a_core_key(lua):
    for k in executions():
        assert lua("fftest_key", k.core, "of_core", "key", "policy") == k.policy
        assert lua("fftest_key", k.core, "of_core", "key", "dep", "e9") == k.dep_edge("e9")
    for n in PARTITIONS:
        fk = FlowKeys(n, UUIDS[0])
        eid = ExecutionId.mint(n, UUIDS[1])
        assert lua("fftest_key", fk.core, "of_core", "key", "out", eid) == fk.outgoing(eid)
        assert lua("fftest_key", fk.core, "of_core", "key", "edge", "e-2") == fk.edge("e-2")


def test_channels_noop_and_core_template(lua):
    assert lua("fftest_key_const", None, "DAG_COMPLETIONS") == keys.DAG_COMPLETIONS_CHANNEL
    for n in PARTITIONS:
        ix = PartitionKeys(n)
        assert lua("fftest_key", None, "is_noop", "none", ix.noop) == 1
        assert lua("fftest_key", None, "is_noop", "none", ix.idempotency("ns", "k")) == 0
        # ffcore only knows the family's pattern (keys.CORE_TEMPLATES), used to find and drop templates.
        template = lua("fftest_key", ix.noop, "core_template", "tag", "0badf00d")
        assert template == f"ff:tmpl:{ix.tag}:core:0badf00d"
        assert fnmatch.fnmatchcase(template, keys.CORE_TEMPLATES)


def test_no_key_is_formatted_outside_the_builders():
    """Every `'ff:...'` literal of the library lives in helpers.lua's ff_key (comments aside)."""
    literal = re.compile(r"""['"]ff:""")
    for name in file_order():
        lines = (LUA_DIR / name).read_text().splitlines()
        code = [(i, ln.split("--", 1)[0]) for i, ln in enumerate(lines, 1)]
        hits = [i for i, ln in code if literal.search(ln)]
        if name == "helpers.lua":
            start = next(i for i, ln in code if ln.startswith("local ff_key = {"))
            end = next(i for i, ln in code if i > start and ln.startswith("local function"))
            hits = [i for i in hits if not start <= i < end]
        assert not hits, f"lua/{name} builds keys by hand on lines {hits}"
