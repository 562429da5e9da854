"""An upstream FlowFabric v0.15.0 deployment for tests: its released library (test data, ../shared/upstream)
loaded into a throwaway Valkey, and records written only by calling ITS functions the way its own server and
workers do (v34 call shapes, read from the library's header comments). Our key builders name the keys: the
layout is the contract's.

Fixtures: `upstream_server` (module), `upstream_backend` (a Backend in upstream mode on a flushed keyspace; the
library survives FLUSHALL), `upstream_dashboard` (the dashboard's backend pointed at it)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from ffcore import functions as F
from ffcore.backend import Backend
from ffcore.embedded import EmbeddedValkey
from ffcore.ids import parse_flow_id
from ffcore.keys import ExecKeys, FlowKeys, PartitionKeys
from ffcore.partition import flow_partition
from ffcore.settings import Settings
from tests.upstream_library import upstream_v015_source

__all__ = ["Deployment", "upstream", "upstream_backend", "upstream_dashboard", "upstream_server"]

#: Solo executions of these tests live on this partition.
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


@pytest.fixture(scope="module")
def upstream_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedValkey]:
    s = EmbeddedValkey(tmp_path_factory.mktemp("upstream-v015"), persistent=False).start()
    c = Backend.connect(Settings.from_url(s.url), load=False).client
    c.function_load(upstream_v015_source())
    yield s
    s.stop()


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
    from dashboard import backend as dashboard_backend_module

    dashboard_backend_module.reset_backend()
    dashboard_backend_module._backend = Backend.connect(upstream_backend.settings)
    yield dashboard_backend_module._backend
    dashboard_backend_module.reset_backend()
