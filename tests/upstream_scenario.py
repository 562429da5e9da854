"""A small upstream v0.15.0 deployment, made the way upstream's own services make it: every record written by
upstream's released library (../shared/upstream, test data) through its functions, with the KEYS/ARGV its headers
give. Solo executions on three partitions, a flow with edges (one downstream an `any_of` edge group), an execution
suspended on a composite condition, one running with stream frames, a budget, a quota and a worker registration."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

from ffcore import functions as F
from ffcore import keys
from ffcore.functions.base import Call
from ffcore.ids import ExecutionId, new_uuid
from ffcore.keys import BudgetKeys, ExecKeys, FlowKeys, PartitionKeys, QuotaKeys
from ffcore.partition import budget_partition, flow_partition, quota_partition
from ffcore.settings import Settings

NS = "acme"
LANE = "default"
WORKER = "up-worker-1"
WIID = "up-wiid-1"


def run(c: Any, call: Call, name: str | None = None) -> list[Any]:
    """FCALL the library as upstream's client does; an error reply fails the scenario loudly."""
    reply = c.fcall(name or call.function, len(call.keys), *call.keys, *call.args)
    assert isinstance(reply, list) and reply[0] == 1, f"{name or call.function}: {reply!r}"
    return reply


def code_digest(c: Any) -> str:
    """The loaded library's code (FUNCTION LIST WITHCODE), hashed: what "left byte-for-byte as it was" compares."""
    libs = c.execute_command("FUNCTION", "LIST", "LIBRARYNAME", "flowfabric", "WITHCODE")
    text = repr(sorted(repr(lib) for lib in libs))
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class Made:
    solo: list[str] = field(default_factory=list)
    flow_id: str = ""
    flow_partition: int = 0
    members: dict[str, str] = field(default_factory=dict)
    suspended: str = ""
    waitpoint_id: str = ""
    #: The waitpoint's HMAC token (upstream's suspend mints it).
    token: str = ""
    running: str = ""
    #: The running execution's lease (appending frames needs it).
    fence: F.Fence | None = None
    best_effort: str = ""
    budget_id: str = ""
    quota_id: str = ""

    def executions(self) -> list[str]:
        return [*self.solo, *self.members.values(), self.suspended, self.running, self.best_effort]


def create(c: Any, eid: str, kind: str = "email", lane: str = LANE) -> str:
    run(c, F.create_execution(ExecKeys(eid), namespace=NS, lane=lane, kind=kind, priority=0, creator="svc",
                              payload=b'{"to":"a@b.c"}'))
    return eid


def claim(c: Any, eid: str, lane: str = LANE) -> F.Fence:
    k = ExecKeys(eid)
    run(c, F.issue_claim_grant(k, lane=lane, worker_id=WORKER, worker_instance_id=WIID))
    lease, attempt = new_uuid(), new_uuid()
    r = run(c, F.claim_execution(k, lane=lane, worker_id=WORKER, worker_instance_id=WIID, lease_id=lease,
                                 attempt_id=attempt, lease_ttl_ms=60_000))
    core = {x.decode(): y.decode() for x, y in c.hgetall(k.core).items()}
    assert r
    return F.Fence(lease, int(core["current_lease_epoch"]), attempt, int(core["current_attempt_index"]), WIID, lane)


def append(c: Any, eid: str, f: F.Fence, payload: str, *, mode: str = "", frame_type: str = "token",
           ttl_ms: int = 0) -> None:
    """ff_append_frame with v0.15's 4 KEYS / 19 ARGV (stream mode, patch kind, TTL and MAXLEN sizing last)."""
    k, i = ExecKeys(eid), f.attempt_index
    ks = [k.core, k.stream(i), k.stream_meta(i), k.stream_summary(i)]
    args = [eid, i, f.lease_id, f.lease_epoch, frame_type, "", payload, "utf8", "", "worker", 1000, f.attempt_id,
            65536, mode, "json-merge-patch" if mode == "summary" else "", ttl_ms or "", 64 if ttl_ms else "",
            1024 if ttl_ms else "", "0.2" if ttl_ms else ""]
    reply = c.fcall("ff_append_frame", len(ks), *ks, *args)
    assert reply[0] == 1, reply


def build(c: Any, settings: Settings) -> Made:
    m = Made()
    now = int(time.time() * 1000)
    for n in (1, 2, 3):
        m.solo.append(create(c, ExecutionId.mint(n)))
        time.sleep(0.003)  # distinct created_at (server ms)
    # A flow: a -> d, b -> d with d's inbound edges an any_of group, and c alone.
    m.flow_id = new_uuid()
    n = m.flow_partition = flow_partition(m.flow_id, settings.partitions.flow)  # members live on the flow's
    fk = FlowKeys(n, m.flow_id)
    run(c, F.create_flow(n, m.flow_id, kind="pipeline", namespace=NS, now_ms=now))
    for name in ("a", "b", "c", "d"):
        m.members[name] = create(c, ExecutionId.mint(n), kind=f"step-{name}")
        run(c, F.add_execution_to_flow(n, m.flow_id, ExecKeys(m.members[name]), now_ms=now))
    d = m.members["d"]
    run(c, F.set_edge_group_policy(fk, d, variant="any_of", on_satisfied="let_run", now_ms=now))
    rev = int(c.hget(fk.core, "graph_revision") or 0)
    for up in ("a", "b"):
        edge = new_uuid()
        run(c, F.stage_dependency_edge(fk, edge_id=edge, upstream=m.members[up], downstream=d, expected_revision=rev,
                                       now_ms=now))
        rev += 1
        run(c, F.apply_dependency_to_child(ExecKeys(d), lane=LANE, flow_id=m.flow_id, edge_id=edge,
                                           upstream=m.members[up], graph_revision=rev, now_ms=now))
    # An execution suspended on a composite condition (two signals, both needed).
    run(c, F.rotate_waitpoint_hmac_secret(PartitionKeys(2), new_kid="k1", new_secret_hex="ab" * 32, grace_ms=0))
    m.suspended = create(c, ExecutionId.mint(2), kind="approval")
    f = claim(c, m.suspended)
    m.waitpoint_id = new_uuid()
    wkey = f"wpk:{m.waitpoint_id}"
    tree = {"kind": "AllOf", "path": "r", "members": [
        {"kind": "Single", "path": "r.0", "waitpoint_key": wkey, "matcher": {"kind": "ByName", "name": "approve"}},
        {"kind": "Single", "path": "r.1", "waitpoint_key": wkey, "matcher": {"kind": "ByName", "name": "legal"}}]}
    cond = json.dumps({"v": 1, "composite": True, "tree": tree})
    call = F.suspend_typed(ExecKeys(m.suspended), f, suspension_id=new_uuid(), waitpoints=[(m.waitpoint_id, wkey)],
                           condition_json=cond, policy_json="{}", timeout_at=now + 3_600_000)
    reply = run(c, call, "ff_suspend_execution")
    m.token = next(x.decode() for x in reply[2:] if isinstance(x, bytes) and x.count(b":") == 1 and len(x) > 40)
    # A running execution with frames in its attempt's stream.
    m.running = create(c, ExecutionId.mint(3), kind="llm")
    f = m.fence = claim(c, m.running)
    for i in range(3):
        append(c, m.running, f, f"tok{i}")
    for patch in ('{"progress":10,"step":"fetch"}', '{"progress":60}'):  # summary mode: merge patches
        append(c, m.running, f, patch, mode="summary", frame_type="progress")
    # One whose stream holds best-effort frames only: the whole stream expires.
    m.best_effort = create(c, ExecutionId.mint(4), kind="live")
    f = claim(c, m.best_effort)
    append(c, m.best_effort, f, "blip", mode="best_effort", ttl_ms=600_000)
    # Budget, quota, worker.
    m.budget_id = new_uuid()
    b = BudgetKeys(budget_partition(m.budget_id, settings.partitions.budget), m.budget_id)
    run(c, F.create_budget(b, scope_type="lane", scope_id=LANE, enforcement_mode="strict", on_hard_limit="fail",
                           on_soft_limit="warn", reset_interval_ms=0, now_ms=now, dimensions=["tokens"],
                           hard=[1000], soft=[800]))
    m.quota_id = new_uuid()
    q = QuotaKeys(quota_partition(m.quota_id, settings.partitions.quota), m.quota_id)
    run(c, F.create_quota_policy(q, window_seconds=60, max_requests_per_window=100, max_concurrent=5, now_ms=now))
    wk = [keys.upstream_worker_alive(NS, WIID), keys.upstream_worker_caps(NS, WIID), keys.upstream_workers_index(NS)]
    assert c.fcall("ff_register_worker", 3, *wk, WIID, WORKER, LANE, "gpu", 60_000, now)[0] == 1
    return m


def signal(c: Any, m: Made, name: str) -> list[Any]:
    """Deliver a signal to the suspended execution's waitpoint with upstream's 15-KEYS shape."""
    k = ExecKeys(m.suspended)
    call = F.deliver_signal(k, lane=LANE, waitpoint_id=m.waitpoint_id, signal_id=new_uuid(),
                            signal=F.Signal(name, source_identity="ops"), token=m.token)
    return run(c, Call(call.function, [*call.keys, k.idx.signal_delivery], call.args))
