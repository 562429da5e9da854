"""Server-side scheduling for remote workers: find the next eligible execution and issue a claim grant.

The worker then claims with ff_claim_execution (or the resumed path) using the grant. Partitions are
visited once, starting at a per-worker offset so different workers spread over partitions.
"""

from __future__ import annotations

import contextlib
import zlib
from dataclasses import dataclass

from ffcore import functions as F
from ffcore.backend import Backend
from ffcore.errors import ScriptError
from ffcore.keys import ExecKeys, PartitionKeys
from ffcore.reads import text

_SKIP = frozenset({"grant_already_exists", "execution_not_in_eligible_set", "execution_not_eligible",
                   "execution_not_found"})


@dataclass(frozen=True)
class Grant:
    execution_id: str
    partition_index: int
    grant_key: str
    expires_at_ms: int

    def as_json(self) -> dict[str, object]:
        return {"execution_id": self.execution_id, "partition_family": "execution",
                "partition_index": self.partition_index, "grant_key": self.grant_key,
                "expires_at_ms": self.expires_at_ms}


def claim_for_worker(backend: Backend, *, lane: str, worker_id: str, worker_instance_id: str,
                     capabilities_csv: str, grant_ttl_ms: int, window: int = 32) -> Grant | None:
    """Grant the top eligible execution of the first partition that has one; None when there is no work."""
    p = backend.settings.partitions.flow
    start = zlib.crc32(worker_instance_id.encode()) % p
    for base in range(0, p, window):
        parts = [(start + base + i) % p for i in range(min(window, p - base))]
        pipe = backend.client.pipeline(transaction=False)
        for n in parts:
            pipe.zrange(PartitionKeys(n).lane(lane).eligible, 0, 0)
        heads = [text(h[0]) for h in pipe.execute() if h]
        for eid in heads:
            k = ExecKeys(eid)
            try:
                backend.call(F.issue_claim_grant(k, lane=lane, worker_id=worker_id,
                                                 worker_instance_id=worker_instance_id, grant_ttl_ms=grant_ttl_ms,
                                                 capabilities_csv=capabilities_csv))
            except ScriptError as e:
                if e.code == "capability_mismatch":
                    # Park it on the route index so no worker hot-loops on it (unblocked by a reconciler).
                    with contextlib.suppress(ScriptError):  # raced: someone else moved it
                        backend.call(F.block_execution_for_admission(
                            k, lane=lane, reason="waiting_for_capable_worker",
                            detail=f"no worker with capabilities: {e.details[0] if e.details else ''}",
                            now_ms=backend.now_ms()))
                    continue
                if e.code in _SKIP:
                    continue
                raise
            return Grant(eid, k.eid.partition_index, k.claim_grant, backend.now_ms() + grant_ttl_ms)
    return None
