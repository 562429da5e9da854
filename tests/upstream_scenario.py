"""The one upstream v0.15.0 deployment of the tests, made the way upstream's own services make it: upstream's
released library (../shared/upstream, test data) loaded into a throwaway Valkey, and every record written through
its functions with the v34 KEYS/ARGV its headers give; our key builders name the keys (the layout is the contract's).

- `build()`: the scenario — solo executions on three partitions, a flow with edges (one downstream an `any_of` edge
  group), an execution suspended on a composite condition, one running with stream frames, a budget, a quota and a
  worker registration.
- `Deployment`: single steps for a test's own records (create, take, suspend on a signal, a flow of N members).
- Fixtures (star-import this module): `upstream_server` (module; the library loaded once, it survives FLUSHALL),
  `upstream_settings`, `raw` (a flushed keyspace), `made` (the scenario on it), `up_backend` (the dashboard's
  backend, connected the way `up` connects), `reconciled` (the scenario after one reconciler pass), `upstream` (a
  `Deployment` on a flushed keyspace with partition 5's HMAC secret), `upstream_backend`, `upstream_dashboard`."""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ffcore import functions as F
from ffcore import keys
from ffcore.backend import Backend
from ffcore.embedded import EmbeddedValkey
from ffcore.functions.base import Call
from ffcore.ids import ExecutionId, new_uuid, parse_flow_id
from ffcore.keys import BudgetKeys, ExecKeys, FlowKeys, PartitionKeys, QuotaKeys
from ffcore.partition import budget_partition, flow_partition, quota_partition
from ffcore.settings import Settings
from tests.conftest import dashboard_pointed_at
from tests.upstream_library import upstream_v015_source

__all__ = ["Deployment", "Made", "made", "raw", "reconciled", "up_backend", "upstream", "upstream_backend",
           "upstream_dashboard", "upstream_server", "upstream_settings"]

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


#: A Deployment's solo executions live on this partition.
N = 5
SECRET_HEX = "ab" * 32


@dataclass
class Deployment:
    client: Any
    #: FUNCTION DUMP right after the load: the library must stay byte-for-byte this.
    dump: bytes

    def fcall(self, function: str, ks: list[str], args: list[Any]) -> Any:
        return self.client.fcall(function, len(ks), *ks, *args)

    def secret(self, n: int = N) -> None:
        """What upstream's server does at boot: install the waitpoint HMAC secret of a partition."""
        self.fcall("ff_rotate_waitpoint_hmac_secret", [PartitionKeys(n).hmac_secrets], ["k1", SECRET_HEX, 60_000])

    def create(self, n: int = N, *, lane: str = "default", priority: int = 0, kind: str = "job") -> str:
        eid = f"{{fp:{n}}}:{uuid.uuid4()}"
        k, ix = ExecKeys(eid), PartitionKeys(n)
        reply = self.fcall("ff_create_execution", [
            k.core, k.payload, k.policy, k.tags, k.lane(lane).eligible, ix.noop, ix.execution_deadline,
            ix.all_executions,
        ], [eid, "default", lane, kind, priority, "upstream-test", "{}", b'{"x":1}', "", "", "", "", n])
        assert reply[0] == 1, reply
        return eid

    def take(self, eid: str, *, lane: str = "default") -> F.Fence:
        """A worker's claim (upstream's grant-and-claim in one call)."""
        k, lease_id, attempt_id = ExecKeys(eid), str(uuid.uuid4()), str(uuid.uuid4())
        call = F.issue_grant_and_claim(k, lane=lane, worker_id="w1", worker_instance_id="w1-1", lease_id=lease_id,
                                       attempt_id=attempt_id, lease_ttl_ms=60_000)
        reply = self.fcall(call.function, call.keys, call.args)
        assert reply[0] == 1, reply
        return F.Fence(lease_id, int(reply[3]), attempt_id, int(reply[4]), "w1-1", lane)

    def suspend(self, eid: str, signal_name: str = "approved") -> str:
        """Take and suspend `eid` on a fresh waitpoint waiting for `signal_name`; returns the waitpoint id."""
        fence = self.take(eid)
        wid = str(uuid.uuid4())
        k = ExecKeys(eid)
        condition = json.dumps({"condition_type": "signal_set", "required_signal_names": [signal_name],
                                "signal_match_mode": "any", "minimum_signal_count": 1})
        ours = F.suspend_execution(k, fence, suspension_id=str(uuid.uuid4()), waitpoint_id=wid,
                                   waitpoint_key=f"wpk:{wid}", condition_json=condition, policy_json="{}")
        # v34: + dedup_hash KEY; + idempotency_key, dedup_ttl_ms, num_extra_waitpoints ARGV.
        reply = self.fcall(ours.function, [*ours.keys, k.idx.noop], [*ours.args, "", "", 0])
        assert reply[0] == 1, reply
        return wid

    def flow(self, members: int) -> tuple[str, list[str]]:
        fid = str(uuid.uuid4())
        n = flow_partition(parse_flow_id(fid), 256)
        fk = FlowKeys(n, fid)
        assert self.fcall("ff_create_flow", [fk.core, fk.members, PartitionKeys(n).flow_index],
                          [fid, "dag", "default", 0])[0] == 1
        eids = [self.create(n) for _ in range(members)]
        for e in eids:
            reply = self.fcall("ff_add_execution_to_flow", [fk.core, fk.members, PartitionKeys(n).flow_index,
                                                           ExecKeys(e).core], [fid, e, 0])
            assert reply[0] == 1, reply
        return fid, eids

    def core(self, eid: str) -> dict[str, str]:
        return {a.decode(): b.decode() for a, b in self.client.hgetall(ExecKeys(eid).core).items()}

    def library_unchanged(self) -> bool:
        return bool(self.client.function_dump() == self.dump)


# --- fixtures -------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def upstream_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedValkey]:
    s = EmbeddedValkey(tmp_path_factory.mktemp("upstream-v015"), persistent=False).start()
    b = Backend.connect(Settings.from_url(s.url), load=False)
    b.client.function_load(upstream_v015_source())
    b.close()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def upstream_settings(upstream_server: EmbeddedValkey) -> Settings:
    return Settings.from_url(upstream_server.url)


@pytest.fixture
def raw(upstream_settings: Settings) -> Iterator[Any]:
    """A plain client on a flushed server holding only upstream's library (reloaded: a test may have dropped it)."""
    b = Backend.connect(upstream_settings, load=False)
    b.client.flushall()
    b.client.function_flush()
    b.client.function_load(upstream_v015_source())
    yield b.client
    b.close()


@pytest.fixture
def made(raw: Any, upstream_settings: Settings) -> Made:
    return build(raw, upstream_settings)


@pytest.fixture
def up_backend(raw: Any, upstream_settings: Settings) -> Iterator[Backend]:
    """The dashboard's backend, connected the way `up` connects (it detects upstream mode itself)."""
    b = Backend.connect(upstream_settings)
    assert b.upstream is not None
    with dashboard_pointed_at(b):
        yield b


@pytest.fixture
def reconciled(made: Made, up_backend: Backend) -> Made:
    """The scenario, with the `ff:up:` indexes brought up to date once."""
    from ffcore.upstream.reconcile import reconcile_once

    reconcile_once(up_backend)
    return made


@pytest.fixture
def upstream(upstream_server: EmbeddedValkey) -> Deployment:
    c = Backend.connect(Settings.from_url(upstream_server.url), load=False).client
    c.flushall()  # records only: the library survives
    d = Deployment(c, c.function_dump())
    d.secret()
    return d


@pytest.fixture
def upstream_backend(upstream: Deployment, upstream_server: EmbeddedValkey) -> Iterator[Backend]:
    b = Backend.connect(Settings.from_url(upstream_server.url))
    assert b.upstream is not None and b.upstream.release == "v0.14-v0.15"
    yield b
    b.close()


@pytest.fixture
def upstream_dashboard(upstream_backend: Backend) -> Iterator[Backend]:
    with dashboard_pointed_at(Backend.connect(upstream_backend.settings)) as b:
        yield b


@contextlib.contextmanager
def served(tmp: Path, server: Any, settings: Any) -> Iterator[tuple[Any, Made, Any]]:
    """The scenario on a flushed deployment (the library stays), indexed once as `up`'s ffupindex would, behind a
    daphne of the dashboard (tests/browser/asgi_server): (server, what was made, a raw client)."""
    from ffcore.upstream.reconcile import reconcile_once
    from tests.browser.asgi_server import start

    raw = Backend.connect(settings, load=False)
    raw.client.flushall()  # records only: the library stays
    made = build(raw.client, settings)
    b = Backend.connect(settings)
    reconcile_once(b)
    b.close()
    asgi = start(tmp, server.url)
    try:
        yield asgi, made, raw.client
    finally:
        asgi.stop()
        raw.close()
