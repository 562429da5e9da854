"""ff_complete_batch_and_claim (a batch of one, as the worker's driver sends) on a flow member: its outgoing
edges are satisfied in the same call, with exactly the writes of ff_resolve_dependency(success), and a child
of the same lane is claimed at once."""

from __future__ import annotations

from ffcore import functions as F
from ffcore import keys, wake
from ffcore.flows.dag import resolve_outgoing
from ffcore.flows.flows import EdgeSpec, Flows
from ffcore.ids import ExecutionId
from ffcore.keys import ExecKeys, FlowKeys
from ffcore.reads import decode_map, text
from tests.pubsub_support import confirmed_pubsub

from .invariants import LANE, WORKER, check, claim, complete, core
from .test_fastpath import _norm, snapshot


def fast_complete(backend, eid, fence, result=b"", n=1):
    return backend.call(F.complete_batch_and_claim(
        [(ExecKeys(eid), fence, result)], worker_id=WORKER, capabilities_csv="", lease_ttl_ms=30_000,
        ids=[(f"LID-{i}", f"AID-{i}") for i in range(n)]))


def pair(backend, *, child_lane=LANE, data_passing_ref=""):
    flows = Flows(backend)
    fid = flows.create(kind="pair")
    up, down = flows.build(fid, [{"kind": "up", "lane": LANE}, {"kind": "down", "lane": child_lane}],
                           edges=[EdgeSpec(0, 1, data_passing_ref=data_passing_ref)])
    edge = text(next(iter(backend.client.smembers(FlowKeys(up.partition_index, fid).outgoing(str(up))))))
    return fid, str(up), str(down), edge



def assert_twin_children_alike(backend, a: tuple[str, str, str, str], b: tuple[str, str, str, str]) -> None:
    """Twin flows (flow, edge, upstream, downstream) whose upstreams completed by two different paths: the
    downstream children hold the same keys (ids and partitions aside), waiting with the upstream's result."""
    snaps = []
    for fid, edge, up, down in (a, b):
        subs = {fid: "FID", edge: "EDGE", up: "UP", up.split(":", 1)[1]: "UPU", ExecutionId(up).tag: "TAG"}
        snap = {_norm(k, subs): v for k, v in snapshot(backend, down, subs).items()}
        assert snap["ff:exec:TAG:EID:core"].pop("partition_id") == str(ExecutionId(down).partition_index)
        snaps.append(snap)
    core_a, core_b = snaps[0]["ff:exec:TAG:EID:core"], snaps[1]["ff:exec:TAG:EID:core"]
    assert {f: (core_a.get(f), core_b.get(f)) for f in core_a.keys() | core_b.keys()
            if core_a.get(f) != core_b.get(f)} == {}
    assert snaps[0] == snaps[1]
    assert core(backend, b[3])["public_state"] == "waiting"
    assert backend.client.get(ExecKeys(b[3]).payload) == b"42"  # data passing injected the result

def test_the_child_is_satisfied_like_resolve_dependency_and_claimed_in_the_same_call(backend):
    fid_a, up_a, down_a, edge_a = pair(backend, data_passing_ref="result")
    fid_b, up_b, down_b, edge_b = pair(backend, data_passing_ref="result")
    # Contract path for twin A: complete, then the resolver (what the completion listener runs).
    complete(backend, up_a, claim(backend, up_a), b"42")
    rep = resolve_outgoing(backend, [(up_a, fid_a, "success")])
    assert rep.satisfied == 1
    # Fast path for twin B, claiming nothing (n=0) so both children are compared before any claim.
    reply = fast_complete(backend, up_b, claim(backend, up_b), b"42", n=0)
    assert reply.raw[0].outcomes == [None]
    for e in (up_a, down_a, up_b, down_b):
        check(backend, e)
    assert_twin_children_alike(backend, (fid_a, edge_a, up_a, down_a), (fid_b, edge_b, up_b, down_b))
    # The listener's later call is a no-op.
    assert resolve_outgoing(backend, [(up_b, fid_b, "success")]).already == 1


def test_a_child_of_the_same_lane_is_claimed_by_the_completing_call(backend):
    _, up, down, _ = pair(backend)
    reply = fast_complete(backend, up, claim(backend, up))
    assert [c.execution_id for c in reply.raw[0].claimed] == [down]
    c = core(backend, down)
    assert (c["public_state"], c["current_lease_id"]) == ("active", "LID-0")
    check(backend, down)


def test_a_child_of_another_lane_is_made_eligible_and_announced(backend):
    _, up, down, _ = pair(backend, child_lane="elsewhere")
    ps = confirmed_pubsub(backend.client, keys.lane_wake("elsewhere"))
    try:
        reply = fast_complete(backend, up, claim(backend, up))
        msg = ps.get_message(timeout=2.0)
    finally:
        ps.close()
    assert reply.raw[0].claimed == []
    assert core(backend, down)["public_state"] == "waiting"
    assert msg is not None and wake.parse(msg["data"]) == [ExecutionId(down).partition_index]
    check(backend, down)


def test_a_flow_cancelled_with_cancel_all_is_left_to_its_cascade(backend):
    fid, up, down, edge = pair(backend)
    fence = claim(backend, up)
    # The flow is cancelled and its cascade has not reached `up` yet (Flows.cancel would start the cascade
    # in the background, which may cancel `up` first).
    backend.call(F.cancel_flow(ExecutionId(up).partition_index, fid, reason="stop", policy="cancel_all",
                               now_ms=backend.now_ms()))
    reply = fast_complete(backend, up, fence)
    assert reply.raw[0].claimed == []
    assert text(backend.client.hget(ExecKeys(down).dep_edge(edge), "state")) == "unsatisfied"
    assert decode_map(backend.client.hgetall(ExecKeys(down).core))["public_state"] != "active"


def test_a_solo_execution_completes_without_touching_any_flow_key(backend):
    from .invariants import create

    eid = create(backend)
    before = {text(k) for k in backend.client.scan_iter(match="ff:flow:*")}
    fast_complete(backend, eid, claim(backend, eid))
    assert {text(k) for k in backend.client.scan_iter(match="ff:flow:*")} == before
    assert core(backend, eid)["public_state"] == "completed"
