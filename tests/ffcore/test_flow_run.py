"""Flows run to completion with real workers: completions resolve edges, failures skip descendants."""

from __future__ import annotations

import threading
import time

from ffcore import functions as F
from ffcore.backend import Backend
from ffcore.execution.client import Client
from ffcore.flows.dag import resolve_outgoing
from ffcore.flows.flows import Flows
from ffcore.keys import ExecKeys
from ffcore.reads import core_refs
from ffcore.worker.worker import Registry
from tests.ffcore.flowkit import LANE, all_finished, scanners, states, wait_until, workers
from tests.ffcore.invariants import check, claim


def _recording_registry(flows: Flows, fid: str, fail_kinds: frozenset[str] = frozenset()):
    """Handlers that record run order and assert every upstream had completed when they started."""
    reg = Registry()
    ran: list[str] = []
    lock = threading.Lock()

    @reg.handler("*")
    def run(task):
        g = flows.get(fid)
        ups = [e.upstream for e in g.edges if e.downstream == task.execution_id]
        st = {n.eid: n.state for n in g.nodes}
        assert all(st[u] == "completed" for u in ups), f"{task.kind} started before its upstreams: {st}"
        with lock:
            ran.append(task.kind)
        if task.kind in fail_kinds:
            raise RuntimeError(f"{task.kind} broke")
        return {"kind": task.kind}

    return reg, ran


def test_a_diamond_flow_runs_to_completion_in_dependency_order(backend: Backend):
    flows = Flows(backend)
    fid = flows.create(kind="diamond")
    top, left, right, bottom = flows.build(
        fid, [{"kind": k, "lane": LANE} for k in ("top", "left", "right", "bottom")],
        edges=[(0, 1), (0, 2), (1, 3), (2, 3)])
    reg, ran = _recording_registry(flows, fid)
    with scanners(backend), workers(backend, reg):
        final = wait_until(lambda: all_finished(flows, fid))
    assert set(final.values()) == {"completed"}
    assert ran[0] == "top" and ran[-1] == "bottom" and sorted(ran[1:3]) == ["left", "right"]
    g = flows.get(fid)
    assert {e.state for e in g.edges} == {"satisfied"}
    for e in (top, left, right, bottom):
        check(backend, e)


def test_a_fan_out_fan_in_flow_runs_to_completion(backend: Backend):
    flows = Flows(backend)
    fid = flows.create(kind="fan")
    width = 12
    members = [{"kind": "split", "lane": LANE}] + [{"kind": f"part{i}", "lane": LANE} for i in range(width)] + [
        {"kind": "join", "lane": LANE}]
    edges = [(0, i) for i in range(1, width + 1)] + [(i, width + 1) for i in range(1, width + 1)]
    flows.build(fid, members, edges)
    reg, ran = _recording_registry(flows, fid)
    with scanners(backend), workers(backend, reg, n=3):
        final = wait_until(lambda: all_finished(flows, fid))
    assert set(final.values()) == {"completed"}
    assert ran[0] == "split" and ran[-1] == "join" and len(ran) == width + 2
    assert flows.summary(fid) == {"completed": width + 2}


def test_a_failed_parent_skips_all_its_descendants_but_not_its_siblings(backend: Backend):
    flows = Flows(backend)
    fid = flows.create()
    # root -> bad -> c1 -> c2 ; root -> ok ; c1 -> c3 ; ok -> join ; c2 -> join
    kinds = ("root", "bad", "c1", "c2", "c3", "ok", "join")
    ids = dict(zip(kinds, flows.build(fid, [{"kind": k, "lane": LANE} for k in kinds], edges=[
        (0, 1), (1, 2), (2, 3), (2, 4), (0, 5), (5, 6), (3, 6)]), strict=True))
    reg, ran = _recording_registry(flows, fid, fail_kinds=frozenset({"bad"}))
    with scanners(backend), workers(backend, reg):
        final = wait_until(lambda: all_finished(flows, fid))
    assert final[ids["bad"]] == "failed"
    for k in ("c1", "c2", "c3", "join"):
        assert final[ids[k]] == "skipped", k
        check(backend, ids[k])
    assert final[ids["root"]] == final[ids["ok"]] == "completed"
    assert "c1" not in ran and "join" not in ran
    g = flows.get(fid)
    assert {e.state for e in g.edges if e.upstream == ids["bad"]} == {"impossible"}


def test_a_replayed_skipped_member_re_blocks_and_runs_once_its_parent_succeeds(backend: Backend):
    flows = Flows(backend)
    fid = flows.create()
    parent, child, grandchild = flows.build(fid, [{"kind": k, "lane": LANE} for k in ("p", "c", "g")],
                                            edges=[(0, 1), (1, 2)])
    attempts = {"p": 0}
    reg = Registry()

    @reg.handler("*")
    def run(task):
        if task.kind == "p":
            attempts["p"] += 1
            if attempts["p"] == 1:
                raise RuntimeError("first try fails")
        return b"ok"

    c = Client(backend)
    with scanners(backend), workers(backend, reg, n=1):
        wait_until(lambda: all_finished(flows, fid))
        assert states(flows, fid) == {parent: "failed", child: "skipped", grandchild: "skipped"}
        # The child is replayed while its parent is still failed: it waits instead of being skipped again.
        flows.replay(child)
        assert c.get_state(child) == "waiting_children"
        check(backend, child)
        time.sleep(0.6)  # a few reconciler passes: the old failure must not re-skip it
        assert c.get_state(child) == "waiting_children"
        flows.replay(grandchild)
        c.replay(parent)
        final = wait_until(lambda: all_finished(flows, fid))
    assert final == {parent: "completed", child: "completed", grandchild: "completed"}
    assert {e.state for e in flows.get(fid).edges} == {"satisfied"}


def test_the_reconciler_resolves_what_no_message_announces(backend: Backend):
    """An expired parent publishes nothing; without the listener the reconciler still skips the child."""
    flows = Flows(backend)
    fid = flows.create()
    parent, child, ok_parent, ok_child = flows.build(
        fid, [{"kind": k, "lane": LANE} for k in ("p", "c", "q", "d")], edges=[(0, 1), (2, 3)])
    fence = claim(backend, parent, lane=LANE)
    k = ExecKeys(parent)
    backend.call(F.expire_execution(k, core_refs(backend, k), reason="attempt_timeout"))
    fq = claim(backend, ok_parent, lane=LANE)
    backend.call(F.complete_execution(ExecKeys(ok_parent), fq, b"done"))  # its message goes unheard
    assert fence.lease_id
    with scanners(backend, listener=False):
        wait_until(lambda: Client(backend).get_state(child) == "skipped"
                   and Client(backend).get_state(ok_child) == "waiting")
    check(backend, child)
    check(backend, ok_child)


def test_data_passing_copies_the_parent_result_into_the_child_payload(backend: Backend):
    flows = Flows(backend)
    fid = flows.create()
    parent, child = flows.build(fid, [{"kind": "p", "lane": LANE}, {"kind": "c", "lane": LANE}])
    flows.add_edge(fid, parent, child, data_passing_ref="result")
    f = claim(backend, parent, lane=LANE)
    backend.call(F.complete_execution(ExecKeys(parent), f, b'{"rows": 3}'))
    rep = resolve_outgoing(backend, [(parent, fid, "success")])
    assert rep.satisfied == 1
    assert Client(backend).get_payload(child) == b'{"rows": 3}'
    assert Client(backend).get_state(child) == "waiting"
    # A duplicate message is harmless.
    assert resolve_outgoing(backend, [(parent, fid, "success")]).already == 1


def test_the_listener_resubscribes_after_its_connection_is_killed(backend: Backend):
    import threading as th

    from ffcore.engine.base import run_scanners
    from ffcore.engine.dag_listener import CompletionListener

    flows = Flows(backend)
    fid = flows.create()
    parent, child = flows.build(fid, [{"kind": "p", "lane": LANE}, {"kind": "c", "lane": LANE}], edges=[(0, 1)])
    lst = CompletionListener(backend, interval_ms=200)
    stop = th.Event()
    t = th.Thread(target=run_scanners, args=([lst], stop), daemon=True)
    t.start()
    try:
        assert lst.ready.wait(5)
        backend.client.execute_command("CLIENT", "KILL", "TYPE", "pubsub")
        wait_until(lambda: lst.stats.errors >= 1 and lst.ready.is_set())
        f = claim(backend, parent, lane=LANE)
        backend.call(F.complete_execution(ExecKeys(parent), f, b""))
        wait_until(lambda: Client(backend).get_state(child) == "waiting", timeout=5)
    finally:
        stop.set()
        t.join(5)
        lst.close()
