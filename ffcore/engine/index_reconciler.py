"""Index reconciler (ours): registers executions that did not come through ffcore's create.

ffcore's create also writes our own indexes — the newest-first listing index (`PartitionKeys.created`),
the lane registry (`keys.lane_partitions`, `keys.LANES_INDEX`) — and announces eligible work. Executions
created by another client of the same library (e.g. a Rust worker) have none of these. This scanner
walks each partition's `all_executions` set (the contract's, written by every create) with a cursor,
a bounded slice per partition per tick, and adds what is missing: the listing entries (created, per kind,
per tag; scored with the execution's `created_at`), the lane registry, and a wake hint for waiting ones.
Idempotent; a whole pass over N executions takes about N / (partitions x batch) ticks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ffcore import keys, wake

from ..execution import filter_index
from ..keys import ExecKeys, PartitionKeys
from ..reads import decode_map, text
from .base import Scanner


@dataclass
class IndexReconciler(Scanner):
    name: str = "index_reconciler"
    #: SSCAN cursor per partition (0 = start a new pass).
    cursors: dict[int, int] = field(default_factory=dict)

    def tick(self) -> int:
        p = self.backend.settings.partitions.flow
        client = self.backend.client
        pipe = client.pipeline(transaction=False)
        for n in range(p):
            pipe.sscan(PartitionKeys(n).all_executions, self.cursors.get(n, 0), count=self.batch)
        seen: list[tuple[int, str]] = []
        for n, (cursor, members) in enumerate(pipe.execute()):
            self.cursors[n] = int(cursor)
            seen += [(n, text(m)) for m in members]
        acted = 0
        if seen:
            pipe = client.pipeline(transaction=False)
            for n, eid in seen:
                pipe.zscore(PartitionKeys(n).created, eid)
            missing = [row for row, score in zip(seen, pipe.execute(), strict=True) if score is None]
            if missing:
                acted = self._register(missing)
        self.stats.ticks += 1
        self.stats.acted += acted
        return acted

    def _register(self, missing: list[tuple[int, str]]) -> int:
        client = self.backend.client
        pipe = client.pipeline(transaction=False)
        for _, eid in missing:
            pipe.hmget(ExecKeys(eid).core, ["created_at", "lane_id", "public_state", "execution_kind"])
            pipe.hgetall(ExecKeys(eid).tags)
        created: dict[int, dict[str, int]] = {}
        lanes: dict[str, set[int]] = {}
        woken: dict[str, set[int]] = {}
        filtered: list[tuple[str, int, str, dict[str, str]]] = []  # the per-kind / per-tag listing indexes
        got = pipe.execute()
        for i, (n, eid) in enumerate(missing):
            at, lane_raw, state, kind = got[2 * i]
            if at is None:
                continue  # gone (retention) while we looked: nothing to index
            lane = text(lane_raw) or "default"
            created.setdefault(n, {})[eid] = int(text(at) or 0)
            filtered.append((eid, int(text(at) or 0), text(kind), decode_map(got[2 * i + 1])))
            lanes.setdefault(lane, set()).add(n)
            if text(state) == "waiting":
                woken.setdefault(lane, set()).add(n)
        if not created:
            return 0
        pipe = client.pipeline(transaction=False)
        for n, members in created.items():
            pipe.zadd(PartitionKeys(n).created, members, nx=True)
        for eid, at, kind, tags in filtered:
            filter_index.add(pipe, eid, at, kind, tags)
        pipe.sadd(keys.LANES_INDEX, *lanes)
        for lane, parts in lanes.items():
            pipe.sadd(keys.lane_partitions(lane), *parts)
        pipe.execute()
        wake.announce(self.backend, woken)
        return sum(len(m) for m in created.values())
