"""Group commit: ff_complete_batch_and_claim (the worker's driver batches with it: tests/ffcore/test_driver.py).

Covered: a batch leaves, per task, exactly the keys of the contract's ff_complete_execution and leases its
successors as ff_claim_next does (also from a capability index); one refused completion (stale fence, an
already completed task) gets its own typed error while the others complete; bad input is refused before any
write; a flow member's child is satisfied and claimed by the same call; the Python builder's guards;
new_uuid_pairs; the embedded server's jemalloc preload.
"""

from __future__ import annotations

import dataclasses
import os
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ffcore import functions as F
from ffcore.embedded import EmbeddedValkey, jemalloc_preload, server_env
from ffcore.errors import StaleLease
from ffcore.execution.client import Client
from ffcore.flows.dag import resolve_outgoing
from ffcore.flows.flows import EdgeSpec, Flows
from ffcore.ids import ExecutionId, new_uuid_pairs
from ffcore.keys import ExecKeys, FlowKeys, PartitionKeys
from ffcore.partition import flow_tag
from ffcore.policy import Policy
from ffcore.reads import text
from tests.keyspace import changed, keyspace

from .invariants import LANE, WIID, WORKER, check, claim, complete, core, create, raises
from .test_fastpath import claim_next, contract_claim, snapshot
from .test_fastpath_flows import assert_twin_children_alike

BATCH = "ff_complete_batch_and_claim"


def batch(backend, done, ids=(), *, caps="", caps_csv="") -> F.Claims:
    """One ff_complete_batch_and_claim for `done` = [(eid, fence, result)]; the parsed Claims."""
    call = F.complete_batch_and_claim([(ExecKeys(e), f, r) for e, f, r in done], worker_id=WORKER,
                                      capabilities_csv=caps, lease_ttl_ms=30_000, ids=list(ids), caps_csv=caps_csv)
    return backend.call(call).raw[0]


def leased_to_us(backend, eid: str, lease_id: str) -> None:
    """`eid` is held by (WORKER, WIID) under `lease_id`, with every lease index agreeing (check())."""
    c = check(backend, eid)
    assert (c["public_state"], c["current_lease_id"], c["current_worker_id"], c["current_worker_instance_id"]) == (
        "active", lease_id, WORKER, WIID)
    ix = PartitionKeys(ExecutionId(eid).partition_index)
    assert backend.client.zscore(ix.lease_expiry, eid) == int(c["lease_expires_at"])
    assert backend.client.sismember(ix.worker_leases(WIID), eid)


# ------------------------------------------------------------------ the Lua function
def test_a_batch_leaves_the_keys_of_complete_execution_and_leases_successors_like_claim_next(backend):
    policy = Policy(attempt_timeout_ms=60_000)  # so the attempt-timeout index is written, then cleared
    kw = {"payload": b"\x00in", "tags": {"team": "x"}, "policy": policy}
    twins = [(create(backend, **kw), create(backend, **kw)) for _ in range(3)]
    fences = {}
    for i, (a, b) in enumerate(twins):
        fences[a] = contract_claim(backend, a, f"LID-A{i}", f"AID-A{i}", policy.as_json())
        fences[b] = contract_claim(backend, b, f"LID-B{i}", f"AID-B{i}", policy.as_json())
    succ = []
    for _ in range(3):
        time.sleep(0.002)  # FIFO is by creation millisecond: ties would order by id
        succ.append(create(backend, **kw))

    for i, (a, _) in enumerate(twins):
        complete(backend, a, fences[a], f"res-{i}".encode())
    got = batch(backend, [(b, fences[b], f"res-{i}".encode()) for i, (_, b) in enumerate(twins)],
                [("LID-S0", "AID-S0"), ("LID-S1", "AID-S1")])
    assert got.outcomes == [None, None, None] and got.slow == []
    assert [c.execution_id for c in got.claimed] == succ[:2]  # FIFO, at most len(ids)

    for i, (a, b) in enumerate(twins):
        assert check(backend, b)["public_state"] == "completed"
        assert Client(backend).get_result(b) == f"res-{i}".encode()
        assert snapshot(backend, a, {f"LID-A{i}": "LID", f"AID-A{i}": "AID"}) == snapshot(
            backend, b, {f"LID-B{i}": "LID", f"AID-B{i}": "AID"})

    # The third successor, claimed by ff_claim_next, is the twin of the two the batch claimed.
    assert [c.execution_id for c in claim_next(backend, ids=[("LID-S2", "AID-S2")]).claimed] == [succ[2]]
    twin = snapshot(backend, succ[2], {"LID-S2": "LID", "AID-S2": "AID"})
    for j, c in enumerate(got.claimed):
        assert (c.lease_id, c.lease_epoch, c.attempt_id, c.attempt_index, c.attempt_type) == (
            f"LID-S{j}", 1, f"AID-S{j}", 0, "initial")
        assert c.payload == b"\x00in" and c.tags == {"team": "x"} and c.kind == "job"
        leased_to_us(backend, succ[j], f"LID-S{j}")
        assert backend.client.zscore(PartitionKeys(succ[j].partition_index).lane(LANE).eligible, succ[j]) is None
        assert snapshot(backend, succ[j], {f"LID-S{j}": "LID", f"AID-S{j}": "AID"}) == twin


def test_a_batch_claims_its_successors_from_a_capability_index(backend):
    done = create(backend)
    f = claim(backend, done)
    plain, gpu = create(backend), create(backend, policy=Policy(required_capabilities=("gpu",)))
    index = PartitionKeys(gpu.partition_index).lane(LANE).capable("gpu")
    assert backend.client.zscore(index, gpu) is not None
    got = batch(backend, [(done, f, b"")], [("LID-G", "AID-G")], caps="gpu", caps_csv="gpu")
    # The older plain execution is not in the gpu index: the capable worker gets the gpu one.
    assert got.outcomes == [None] and [c.execution_id for c in got.claimed] == [gpu]
    leased_to_us(backend, gpu, "LID-G")
    assert backend.client.zcard(index) == 0  # a claim prunes the capability index
    assert core(backend, plain)["public_state"] == "waiting"


def test_a_refused_completion_gets_its_own_error_and_the_others_complete(backend):
    eids = [create(backend) for _ in range(4)]
    fences = [claim(backend, e) for e in eids]
    waiting = create(backend)
    bad_lease = dataclasses.replace(fences[1], lease_id="not-the-lease")
    bad_epoch = dataclasses.replace(fences[3], lease_epoch=fences[3].lease_epoch + 1)
    untouched = {eids[1]: snapshot(backend, eids[1], {}), eids[3]: snapshot(backend, eids[3], {})}

    got = batch(backend, [(eids[0], fences[0], b"r0"), (eids[1], bad_lease, b"r1"), (eids[2], fences[2], b"r2"),
                          (eids[3], bad_epoch, b"r3")], [("LID-N", "AID-N")])
    assert got.outcomes is not None and [o and o.code for o in got.outcomes] == [None, "stale_lease", None,
                                                                                  "stale_lease"]
    assert all(isinstance(o, StaleLease) and o.function == BATCH for o in got.outcomes[1::2])
    # A refusal does not stop the claim either.
    assert [c.execution_id for c in got.claimed] == [waiting]
    for i in (0, 2):
        assert check(backend, eids[i])["public_state"] == "completed"
        assert Client(backend).get_result(eids[i]) == f"r{i}".encode()
    for i in (1, 3):
        assert snapshot(backend, eids[i], {}) == untouched[eids[i]]  # not a single write
        # The contract's own function gives the same answer for the same input.
        fence = bad_lease if i == 1 else bad_epoch
        raises("stale_lease", lambda e=eids[i], f=fence: complete(backend, e, f, b"x"))
        assert check(backend, eids[i])["public_state"] == "active"


def test_a_completion_of_an_execution_that_does_not_exist_is_refused_as_not_found_mid_batch(backend):
    # The batch's core read (one generated table constructor for the field list) must still tell a
    # missing hash from one without the fields: the contract answers execution_not_found.
    eids = [create(backend) for _ in range(3)]
    fences = [claim(backend, e) for e in eids]
    ghost = str(ExecutionId.mint(ExecutionId(eids[0]).partition_index))
    got = batch(backend, [(eids[0], fences[0], b"r0"), (ghost, fences[1], b"g"), (eids[2], fences[2], b"r2")])
    assert got.outcomes is not None and [o and o.code for o in got.outcomes] == [None, "execution_not_found", None]
    raises("execution_not_found", lambda: complete(backend, ghost, fences[1], b"g"))
    assert [check(backend, e)["public_state"] for e in eids] == ["completed", "active", "completed"]
    assert not backend.client.keys(f"*{ghost.split(':', 1)[1]}*")  # nothing written for the ghost


def test_the_same_task_twice_in_a_batch_completes_once(backend):
    eid = create(backend)
    f = claim(backend, eid)
    got = batch(backend, [(eid, f, b"one"), (eid, f, b"two")])
    assert got.outcomes is not None and got.outcomes[0] is None
    second = got.outcomes[1]
    assert second is not None and second.code == "execution_not_active" and second.details == ["success", "1"]
    # ...which is exactly what a second ff_complete_execution answers.
    assert raises("execution_not_active", lambda: complete(backend, eid, f, b"three")).details == ["success", "1"]
    assert Client(backend).get_result(eid) == b"one"
    assert check(backend, eid)["public_state"] == "completed"


def _retag(key: str, tag: str, other: str) -> str:
    assert tag in key
    return key.replace(tag, other)


def test_bad_input_is_refused_before_any_write(backend):
    eid = create(backend)
    f = claim(backend, eid)
    create(backend)  # a claimable successor: a partial run would claim it
    good = F.complete_batch_and_claim([(ExecKeys(eid), f, b"r")], worker_id=WORKER, capabilities_csv="",
                                      lease_ttl_ms=30_000, ids=[("l", "a")])
    assert len(good.keys) == 6 + 12 and good.args[:3] == [1, "0", "1"]
    tag = eid.tag
    other = flow_tag((eid.partition_index + 1) % backend.settings.partitions.flow)
    one = good.args[3:8]  # the completion's 5 ARGV
    claim_args = good.args[8:]
    cases = {
        "C = 0": (good.keys[:6], [0, "0", "", *claim_args]),
        "C = 65": (good.keys, [65, *good.args[1:]]),
        "C not an integer": (good.keys, ["1.5", *good.args[1:]]),
        "C = 2 with the keys of 1": (good.keys, [2, "0", "10", *one, *one, *claim_args]),
        "a key missing": (good.keys[:-1], good.args),
        "a key too many": ([*good.keys, good.keys[-1]], good.args),
        "capability flag without its key": (good.keys, [1, "1", *good.args[2:]]),
        "wants mask of the wrong length": (good.keys, [1, "0", "11", *good.args[3:]]),
        "wants mask not 0/1": (good.keys, [1, "0", "y", *good.args[3:]]),
        "wanted successors without their ids": (good.keys, [1, "0", "1", *one, *claim_args[:6], 0]),
        "a completion key of another partition": (
            [*good.keys[:7], _retag(good.keys[7], tag, other), *good.keys[8:]], good.args),
        "a claim key of another partition": ([*good.keys[:2], _retag(good.keys[2], tag, other), *good.keys[3:]],
                                             good.args),
        "a capability index of another partition": (
            [*good.keys[:6], _retag(PartitionKeys(eid.partition_index).lane(LANE).capable("gpu"), tag, other),
             *good.keys[6:]], [1, "1", *good.args[2:]]),
        "lease_ttl_ms not a number": (good.keys, [*good.args[:12], "soon", *good.args[13:]]),
    }
    assert good.args[12] == 30_000  # (the claim's lease_ttl_ms, replaced above)
    before = keyspace(backend)
    for what, (keys_, args) in cases.items():
        err = raises("invalid_input", lambda k=keys_, a=args: backend.call(F.Call(BATCH, k, a, good.parse)))
        assert err.details, what
        assert changed(before, keyspace(backend)) == [], what
    check(backend, eid)
    assert core(backend, eid)["public_state"] == "active"


def test_the_builder_refuses_an_empty_oversized_or_mixed_batch(backend):
    eid = create(backend)
    f = claim(backend, eid)
    k = ExecKeys(eid)
    kw = {"worker_id": WORKER, "capabilities_csv": "", "lease_ttl_ms": 30_000, "ids": []}
    assert F.MAX_BATCH == 64
    elsewhere = ExecKeys(ExecutionId.mint((eid.partition_index + 1) % backend.settings.partitions.flow))
    for done in ([], [(k, f, b"")] * 65, [(k, f, b""), (elsewhere, f, b"")],
                 [(k, f, b""), (k, dataclasses.replace(f, lane="other"), b"")],
                 [(k, f, b""), (k, dataclasses.replace(f, worker_instance_id="another-wiid"), b"")]):
        with pytest.raises(ValueError):
            F.complete_batch_and_claim(done, **kw)
    assert len(F.complete_batch_and_claim([(k, f, b"")] * 64, **kw).keys) == 6 + 12 * 64


def flow(backend, *, data_passing_ref=""):
    """A flow `up -> down` plus an unconnected member `solo` (same partition: they can share a batch)."""
    flows = Flows(backend)
    fid = flows.create(kind="trio")
    up, down, solo = flows.build(fid, [{"kind": "up", "lane": LANE}, {"kind": "down", "lane": LANE},
                                       {"kind": "solo", "lane": LANE}],
                                 edges=[EdgeSpec(0, 1, data_passing_ref=data_passing_ref)])
    edge = text(next(iter(backend.client.smembers(FlowKeys(up.partition_index, fid).outgoing(str(up))))))
    return fid, str(up), str(down), str(solo), edge


def test_a_flow_members_child_is_satisfied_like_resolve_dependency(backend):
    fid_a, up_a, down_a, solo_a, edge_a = flow(backend, data_passing_ref="result")
    fid_b, up_b, down_b, solo_b, edge_b = flow(backend, data_passing_ref="result")
    complete(backend, solo_a, claim(backend, solo_a), b"")
    complete(backend, up_a, claim(backend, up_a), b"42")
    assert resolve_outgoing(backend, [(up_a, fid_a, "success")]).satisfied == 1
    # The member shares the batch with another one; nothing is claimed, so both children compare as is.
    got = batch(backend, [(solo_b, claim(backend, solo_b), b""), (up_b, claim(backend, up_b), b"42")])
    assert got.outcomes == [None, None] and got.claimed == []
    for e in (up_a, down_a, up_b, down_b, solo_b):
        check(backend, e)
    assert_twin_children_alike(backend, (fid_a, edge_a, up_a, down_a), (fid_b, edge_b, up_b, down_b))
    assert resolve_outgoing(backend, [(up_b, fid_b, "success")]).already == 1  # the listener's later call


def test_a_flow_members_child_of_the_same_lane_is_claimed_by_the_batch(backend):
    _, up, down, solo, _ = flow(backend)
    got = batch(backend, [(up, claim(backend, up), b""), (solo, claim(backend, solo), b"")], [("LID-0", "AID-0")])
    assert got.outcomes == [None, None]
    assert [c.execution_id for c in got.claimed] == [down]
    leased_to_us(backend, down, "LID-0")
    assert core(backend, up)["public_state"] == "completed"


# ------------------------------------------------------------------ GroupCommit

# ------------------------------------------------------------------ ids
_V4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def test_new_uuid_pairs_are_distinct_lowercase_v4_uuids():
    assert new_uuid_pairs(0) == []
    pairs = new_uuid_pairs(200)
    assert len(pairs) == 200 and all(len(p) == 2 for p in pairs)
    flat = [u for p in pairs for u in p]
    assert len(set(flat)) == 400
    for u in flat:
        assert _V4.match(u), u
        parsed = uuid.UUID(u)
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122 and str(parsed) == u
    assert set(flat).isdisjoint(u for p in new_uuid_pairs(200) for u in p)


# ------------------------------------------------------------------ jemalloc preload
@pytest.fixture
def fresh_preload(monkeypatch) -> Iterator[None]:
    monkeypatch.delenv("FF_EMBEDDED_JEMALLOC", raising=False)
    jemalloc_preload.cache_clear()
    yield
    monkeypatch.undo()
    jemalloc_preload.cache_clear()


def _maps_of_server(tmp: Path) -> str:
    server = EmbeddedValkey(tmp, persistent=False).start()
    try:
        assert server.proc is not None
        return Path(f"/proc/{server.proc.pid}/maps").read_text()
    finally:
        server.stop()


def test_the_embedded_server_runs_on_jemalloc(tmp_path, fresh_preload):
    lib = jemalloc_preload()
    assert lib, "libjemalloc.so.2 not found in ffcore.embedded.JEMALLOC_PATHS: install libjemalloc2 (CI does)"
    assert os.path.exists(lib) and lib in server_env()["LD_PRELOAD"].split()
    assert "jemalloc" in _maps_of_server(tmp_path)


@pytest.mark.parametrize("off", ["0", "false", "No", " OFF "])
def test_ff_embedded_jemalloc_off_keeps_libc_malloc(tmp_path, fresh_preload, monkeypatch, off):
    monkeypatch.setenv("FF_EMBEDDED_JEMALLOC", off)
    jemalloc_preload.cache_clear()
    assert jemalloc_preload() == ""
    assert "jemalloc" not in server_env().get("LD_PRELOAD", "")
    if off == "0":  # one real server is enough
        assert "jemalloc" not in _maps_of_server(tmp_path)
