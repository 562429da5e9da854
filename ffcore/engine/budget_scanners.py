"""Scanners: budget reset, admission unblock (budget / quota / route), quota reconciler, budget sampler,
budget reconciler (`breached_at`, spend release).

Each does its whole pass in a few pipelines instead of one round trip per partition: the blocked sets,
reset schedules and policy sets are small and read together.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ffcore import events, keys
from ffcore import functions as F
from ffcore.budgets import admission, budgets, quotas, spend

from ..backend import Backend
from ..errors import ScriptError
from ..keys import BudgetKeys, ExecKeys, PartitionKeys
from ..reads import text
from .base import Scanner
from .lanes import LaneCache

#: Cadences (ms): resets are due at exact times; unblocking and reconciling are checks, not hot paths.
BUDGET_RESET_INTERVAL_MS = 1000
UNBLOCK_INTERVAL_MS = 2000
QUOTA_RECONCILE_INTERVAL_MS = 2000
BUDGET_SAMPLE_INTERVAL_MS = 5000
#: Upstream runs its budget reconciler every 30 s; ours also gives back the spend of failed and cancelled
#: executions, which an operator watching the budget page expects to see within seconds.
BUDGET_RECONCILE_INTERVAL_MS = 5000


@dataclass
class _WholePass(Scanner):
    """A scanner whose tick is one `run(now)` over all partitions (not one round trip per partition)."""

    def run(self, now_ms: int) -> int:
        raise NotImplementedError

    def tick(self) -> int:
        now = self.backend.now_ms()
        acted = self.run(now)
        self.stats.ticks += 1
        self.stats.acted += acted
        self.stats.last_tick_ms = now
        return acted


@dataclass
class BudgetResetScanner(_WholePass):
    """Zero budgets whose `next_reset_at` is due (ff_reset_budget reschedules them), then unblock the
    executions that were held back by them."""

    name: str = "budget_reset"

    def run(self, now_ms: int) -> int:
        pipe = self.backend.client.pipeline(transaction=False)
        for m in range(self.backend.settings.partitions.budget):
            pipe.zrangebyscore(BudgetKeys(m, "-").resets_index, "-inf", now_ms, start=0, num=self.batch,
                               withscores=True)
        due = [(text(b), int(s)) for batch in pipe.execute() for b, s in batch]
        if not due:
            return 0
        bks = [budgets.budget_keys(self.backend, b) for b, _ in due]
        replies = self.backend.call_many([F.reset_budget(b, now_ms=now_ms) for b in bks])
        self.note_due(now_ms, [s for _, s in due])  # a reset time that has come is due whatever the reply
        reset = [b for b, r in zip(bks, replies, strict=True) if not isinstance(r, ScriptError)]
        unblock_budget_waiters(self.backend, reset, self.batch)
        return len(reset)


def unblock_budget_waiters(backend: Backend, bks: list[BudgetKeys], limit: int = 200) -> int:
    """Re-check (and unblock) the executions blocked on these budgets, e.g. right after a reset."""
    if not bks:
        return 0
    pipe = backend.client.pipeline(transaction=False)
    for b in bks:
        pipe.zrange(keys.budget_blocked(b), 0, limit - 1)
    return admission.unblock(backend, [text(e) for batch in pipe.execute() for e in batch])


@dataclass
class AdmissionUnblockScanner(_WholePass):
    """Upstream's unblock scanner: every lane's blocked:budget / :quota / :route set, oldest first."""

    name: str = "admission_unblock"
    lanes: LaneCache | None = field(default=None)

    def run(self, now_ms: int) -> int:
        if self.lanes is None:
            self.lanes = LaneCache(self.backend)
        lanes = self.lanes.lanes()
        if not lanes:
            return 0
        pipe = self.backend.client.pipeline(transaction=False)
        for n in range(self.backend.settings.partitions.flow):
            for lane in lanes:
                lk = PartitionKeys(n).lane(lane)
                for suffix in admission.BLOCKED_INDEX.values():
                    pipe.zrange(lk.index(suffix), 0, self.batch - 1, withscores=True)
        found = sorted((s, text(e)) for batch in pipe.execute() for e, s in batch)
        if not found:
            return 0
        released = admission.unblock(self.backend, [e for _, e in found])
        # An execution held by a quota, a budget at its limit or a missing capability is rightly parked: no lag,
        # however long it waits. One becomes due when its blocker clears, which only this pass can see — at
        # most one cadence ago — so lag is the time since the previous pass, and only when this one released any.
        if released:
            self.note_due(now_ms, [self.stats.last_tick_ms or now_ms - self.interval_ms])
        return released


@dataclass
class QuotaReconciler(_WholePass):
    """Gives back quota slots of admitted executions that are no longer running (finished — e.g.
    cancelled by an operator or expired —, suspended, or gone), trims an over-counted concurrency
    counter to the admitted set, and prunes the waiting index."""

    name: str = "quota_reconciler"

    def run(self, now_ms: int) -> int:
        qids = quotas.list_quota_ids(self.backend, limit=10_000)
        if not qids:
            return 0
        qks = [quotas.quota_keys(self.backend, q) for q in qids]
        pipe = self.backend.client.pipeline(transaction=False)
        for q in qks:
            pipe.srandmember(q.admitted_set, self.batch)
            pipe.zrange(keys.quota_blocked(q), 0, self.batch - 1)
        raw = pipe.execute()
        members = [(q, text(e)) for i, q in enumerate(qks) for e in raw[2 * i]]
        waiting = [(q, text(e)) for i, q in enumerate(qks) for e in raw[2 * i + 1]]
        pipe = self.backend.client.pipeline(transaction=False)
        for _, e in members + waiting:
            pipe.hmget(ExecKeys(e).core, ["lifecycle_phase", "eligibility_state"])
        states = [(text(a), text(b)) for a, b in pipe.execute()] if members or waiting else []
        acted = 0
        for (q, e), (phase, elig) in zip(members, states, strict=False):
            if admission.idle({"lifecycle_phase": phase, "eligibility_state": elig}, False) and \
                    admission.release(self.backend, q.quota_id, e, only_if=admission.idle):
                acted += 1
        stale = [(q, e) for (q, e), (_, elig) in zip(waiting, states[len(members):], strict=True)
                 if elig != "blocked_by_quota"]
        if stale:
            pipe = self.backend.client.pipeline(transaction=False)
            for q, e in stale:
                pipe.zrem(keys.quota_blocked(q), e)
            pipe.execute()
        for q in qks:
            acted += admission.trim_drift(self.backend, q.quota_id)
        return acted


@dataclass
class BudgetSampler(_WholePass):
    """Usage snapshots for the burn rate (only when usage changed), and pruning of the blocked index."""

    name: str = "budget_sampler"

    def run(self, now_ms: int) -> int:
        ids = budgets.list_budget_ids(self.backend, limit=10_000)
        n = budgets.sample_usage(self.backend, ids)
        bks = [budgets.budget_keys(self.backend, b) for b in ids]
        pipe = self.backend.client.pipeline(transaction=False)
        for b in bks:
            pipe.zrange(keys.budget_blocked(b), 0, self.batch - 1)
        listed = [(b, text(e)) for b, batch in zip(bks, pipe.execute() if bks else [], strict=True) for e in batch]
        if listed:
            pipe = self.backend.client.pipeline(transaction=False)
            for _, e in listed:
                pipe.hget(ExecKeys(e).core, "eligibility_state")
            pipe2 = self.backend.client.pipeline(transaction=False)
            for (b, e), elig in zip(listed, pipe.execute(), strict=True):
                if text(elig) != "blocked_by_budget":
                    pipe2.zrem(keys.budget_blocked(b), e)
            pipe2.execute()
        return n


@dataclass
class BudgetReconciler(_WholePass):
    """Upstream's budget reconciler (server scanner #9) plus spend release: per budget id listed in
    `budget_policies`, prune the id when it has no definition, and on a lifetime budget (no reset
    interval) set `breached_at` on its usage hash when a dimension's usage reached its hard limit, clear
    it when none does (ff_reconcile_budget_breach, one atomic call). Then walk each budget's spend
    ledgers (`by_exec:index`, SSCAN `batch` per tick, resuming where the last tick stopped) and release
    the ledgers of executions that ended failed, cancelled, expired or skipped (ffcore.budgets.spend)."""

    name: str = "budget_reconciler"
    cursors: dict[str, int] = field(default_factory=dict)

    def run(self, now_ms: int) -> int:
        ids = budgets.list_budget_ids(self.backend, limit=10_000)
        if not ids:
            return 0
        bks = [budgets.budget_keys(self.backend, b) for b in ids]
        # Releases first, so a breach they end is cleared in the same tick.
        pipe = self.backend.client.pipeline(transaction=False)
        for b in bks:
            pipe.sscan(b.by_exec_index, self.cursors.get(b.budget_id, 0), count=self.batch)
        pairs: list[tuple[str, str]] = []
        for b, (cursor, members) in zip(bks, pipe.execute(), strict=True):
            self.cursors[b.budget_id] = int(cursor)
            pairs += [(b.budget_id, text(e)) for e in members]
        for gone in set(self.cursors) - set(ids):
            del self.cursors[gone]
        ended = [p for p, ok in zip(pairs, spend.releasable(self.backend, [e for _, e in pairs]), strict=True) if ok]
        acted = spend.release_many(self.backend, ended)
        replies = self.backend.call_many([F.reconcile_budget_breach(b, now_ms=now_ms) for b in bks])
        changed = sum(1 for r in replies if isinstance(r, F.Reply) and r.fields[:1] in (["breached"], ["cleared"],
                                                                                        ["pruned"]))
        if changed:
            events.publish(self.backend, topics=["budgets"])
        return acted + changed


def scanners(backend: Backend) -> list[Scanner]:
    """The scanners of this area, configured from backend.settings."""
    batch = backend.settings.scanners.batch
    return [
        BudgetResetScanner(backend, interval_ms=BUDGET_RESET_INTERVAL_MS, batch=batch),
        AdmissionUnblockScanner(backend, interval_ms=UNBLOCK_INTERVAL_MS, batch=batch),
        QuotaReconciler(backend, interval_ms=QUOTA_RECONCILE_INTERVAL_MS, batch=batch),
        BudgetSampler(backend, interval_ms=BUDGET_SAMPLE_INTERVAL_MS, batch=batch),
        BudgetReconciler(backend, interval_ms=BUDGET_RECONCILE_INTERVAL_MS, batch=batch),
    ]
