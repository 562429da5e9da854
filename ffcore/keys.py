"""Every Valkey key name (contract §3), byte-exact. Nothing else in the project formats a key.

Execution keys carry the hash tag twice: `ff:exec:{fp:N}:{fp:N}:<uuid>:core` (tag + full id).
"""

from __future__ import annotations

from collections.abc import Sequence

from .ids import ExecutionId
from .partition import budget_tag, flow_tag, quota_tag

CONFIG_PARTITIONS = "ff:config:partitions"
DAG_COMPLETIONS_CHANNEL = "ff:dag:completions"
WORKERS_INDEX = "ff:idx:workers"
LANES_INDEX = "ff:idx:lanes"

#: Keys of our own (not in the v0.2.0 contract; never touched by its Lua).
EVENTS_CHANNEL = "ff:events"
AUDIT_STREAM = "ff:audit"
SECRET_BOOTSTRAP = "ff:config:waitpoint_hmac_bootstrap"


class ExecKeys:
    """Per-execution keys (§3.1) and the partition/lane indexes it lives in (§3.2)."""

    __slots__ = ("eid", "tag", "_p")

    def __init__(self, eid: str | ExecutionId) -> None:
        self.eid = eid if isinstance(eid, ExecutionId) else ExecutionId(eid)
        self.tag = self.eid.tag
        self._p = f"ff:exec:{self.tag}:{self.eid}:"

    # -- the execution's own records
    @property
    def core(self) -> str:
        return self._p + "core"

    @property
    def payload(self) -> str:
        return self._p + "payload"

    @property
    def result(self) -> str:
        return self._p + "result"

    @property
    def policy(self) -> str:
        return self._p + "policy"

    @property
    def tags(self) -> str:
        return self._p + "tags"

    @property
    def lease_current(self) -> str:
        return self._p + "lease:current"

    @property
    def lease_history(self) -> str:
        return self._p + "lease:history"

    @property
    def claim_grant(self) -> str:
        return self._p + "claim_grant"

    @property
    def attempts(self) -> str:
        return self._p + "attempts"

    @property
    def suspension_current(self) -> str:
        return self._p + "suspension:current"

    @property
    def waitpoints(self) -> str:
        return self._p + "waitpoints"

    @property
    def signals(self) -> str:
        return self._p + "signals"

    @property
    def deps_meta(self) -> str:
        return self._p + "deps:meta"

    def dep_edge(self, edge_id: str) -> str:
        return self._p + f"dep:{edge_id}"

    @property
    def deps_unresolved(self) -> str:
        return self._p + "deps:unresolved"

    @property
    def deps_all_edges(self) -> str:
        return self._p + "deps:all_edges"

    def attempt(self, i: int | str) -> str:
        return f"ff:attempt:{self.tag}:{self.eid}:{i}"

    def attempt_usage(self, i: int | str) -> str:
        return self.attempt(i) + ":usage"

    def attempt_traceback(self, i: int | str) -> str:
        """STRING (ours): the formatted traceback of a failed attempt, tail kept (worker SDK)."""
        return self.attempt(i) + ":traceback"

    @property
    def journal(self) -> str:
        """STREAM (ours): what the contract's records do not keep — progress, spend, backoff, operator
        actions — for the execution's History (ffcore/execution/journal.py)."""
        return self._p + "journal"

    @property
    def renewals(self) -> str:
        """HASH (ours): per attempt `<i>:n`, `<i>:first`, `<i>:last` lease renewals (folded in the History)."""
        return self._p + "renewals"

    def attempt_policy(self, i: int | str) -> str:
        return self.attempt(i) + ":policy"

    def stream(self, i: int | str) -> str:
        return f"ff:stream:{self.tag}:{self.eid}:{i}"

    def stream_meta(self, i: int | str) -> str:
        return self.stream(i) + ":meta"

    def stream_summary(self, i: int | str) -> str:
        """HASH (upstream's later layout): the attempt's rolling summary document (document, version,
        patch_kind, last_updated_ms, first_applied_ms) — read by ff_read_summary."""
        return self.stream(i) + ":summary"

    @property
    def suspension_satisfied_set(self) -> str:
        """SET (upstream v0.13, RFC-014): a composite suspension's satisfier tokens (`leaf:<path>`, `node:<path>`,
        `wp:`/`sig:`/`src:` tokens; ours `count:<path>:<token>`, `m:<path>:<i>`); dropped when it resumes."""
        return self.suspension_current + ":satisfied_set"

    @property
    def suspension_satisfied_signals(self) -> str:
        """SET (upstream v0.13): ids of the signals that contributed to the satisfied set."""
        return self.suspension_satisfied_set + ":signals"

    @property
    def suspension_member_map(self) -> str:
        """HASH (upstream v0.13, diagnostics): `wp:<key>:<path>` -> node path of a composite's tree."""
        return self.suspension_current + ":member_map"

    def suspend_dedup(self, idempotency_key: str) -> str:
        """Ours (upstream's later layout): HASH `outcome` of a typed suspend with this idempotency key."""
        return f"ff:dedup:suspend:{self.tag}:{self.eid}:{idempotency_key}"

    # -- partition-scoped keys this execution's calls pass
    @property
    def idx(self) -> PartitionKeys:
        return PartitionKeys(self.eid.partition_index)

    def lane(self, lane: str) -> LaneKeys:
        return LaneKeys(self.eid.partition_index, lane)


def partition_of_key(key: str) -> int:
    """N of a key carrying the `{fp:N}` hash tag (what every flow/execution partition key has)."""
    start = key.index("{fp:") + 4
    return int(key[start:key.index("}", start)])


class PartitionKeys:
    """Partition index keys (§3.2) of flow/execution partition N."""

    __slots__ = ("n", "tag", "_p")

    def __init__(self, n: int) -> None:
        self.n = n
        self.tag = flow_tag(n)
        self._p = f"ff:idx:{self.tag}:"

    @property
    def lease_expiry(self) -> str:
        return self._p + "lease_expiry"

    def worker_leases(self, worker_instance_id: str) -> str:
        return self._p + f"worker:{worker_instance_id}:leases"

    @property
    def suspension_timeout(self) -> str:
        return self._p + "suspension_timeout"

    @property
    def pending_waitpoint_expiry(self) -> str:
        return self._p + "pending_waitpoint_expiry"

    @property
    def attempt_timeout(self) -> str:
        return self._p + "attempt_timeout"

    @property
    def execution_deadline(self) -> str:
        return self._p + "execution_deadline"

    @property
    def all_executions(self) -> str:
        return self._p + "all_executions"

    @property
    def flow_index(self) -> str:
        return self._p + "flow_index"

    @property
    def hmac_secrets(self) -> str:
        return f"ff:sec:{self.tag}:waitpoint_hmac"

    @property
    def noop(self) -> str:
        return f"ff:noop:{self.tag}"

    @property
    def signal_delivery(self) -> str:
        """STREAM of accepted signals of this partition (v0.13+'s 15th key of ff_deliver_signal; capped ~1000)."""
        return f"ff:part:{self.tag}:signal_delivery"

    def idempotency(self, namespace: str, key: str) -> str:
        return f"ff:idem:{self.tag}:{namespace}:{key}"

    def waitpoint(self, waitpoint_id: str) -> str:
        return f"ff:wp:{self.tag}:{waitpoint_id}"

    def waitpoint_signals(self, waitpoint_id: str) -> str:
        return self.waitpoint(waitpoint_id) + ":signals"

    def waitpoint_condition(self, waitpoint_id: str) -> str:
        return self.waitpoint(waitpoint_id) + ":condition"

    def signal(self, signal_id: str) -> str:
        return f"ff:signal:{self.tag}:{signal_id}"

    def signal_payload(self, signal_id: str) -> str:
        return self.signal(signal_id) + ":payload"

    def signal_dedup(self, waitpoint_id: str, idempotency_key: str) -> str:
        return f"ff:sigdedup:{self.tag}:{waitpoint_id}:{idempotency_key}"

    # -- our own (not in the contract; never touched by the library's 47 functions)
    @property
    def created(self) -> str:
        """ZSET eid -> created_at ms: the newest-first listing source (written by ffcore at create)."""
        return self._p + "created"

    def kind_created(self, kind: str) -> str:
        """ZSET eid -> created_at ms of one execution kind: the kind filter's listing source (ours; written
        beside `created`, see ffcore.execution.filter_index)."""
        return self._p + "kind:" + kind + ":created"

    def tag_created(self, key: str, value: str) -> str:
        """ZSET eid -> created_at ms of executions tagged key=value: the tag filter's listing source (ours).
        The key's length goes first, so a key or value holding "=" cannot name another pair's index."""
        return f"{self._p}tag:{len(key)}:{key}={value}:created"

    def lane(self, lane: str) -> LaneKeys:
        return LaneKeys(self.n, lane)


#: Lane index suffixes in the order the dashboard shows them (§3.2).
LANE_STATE_INDEXES = (
    "eligible", "delayed", "active", "suspended", "terminal",
    "blocked:dependencies", "blocked:budget", "blocked:quota", "blocked:route", "blocked:operator",
)


class LaneKeys:
    """Lane-scoped partition indexes `ff:idx:{fp:N}:lane:<lane>:<suffix>`."""

    __slots__ = ("_p",)

    def __init__(self, n: int, lane: str) -> None:
        self._p = f"ff:idx:{flow_tag(n)}:lane:{lane}:"

    def index(self, suffix: str) -> str:
        return self._p + suffix

    @property
    def eligible(self) -> str:
        return self._p + "eligible"

    @property
    def delayed(self) -> str:
        return self._p + "delayed"

    @property
    def active(self) -> str:
        return self._p + "active"

    @property
    def terminal(self) -> str:
        return self._p + "terminal"

    @property
    def suspended(self) -> str:
        return self._p + "suspended"

    @property
    def blocked_dependencies(self) -> str:
        return self._p + "blocked:dependencies"

    @property
    def blocked_budget(self) -> str:
        return self._p + "blocked:budget"

    @property
    def blocked_quota(self) -> str:
        return self._p + "blocked:quota"

    @property
    def blocked_route(self) -> str:
        return self._p + "blocked:route"

    @property
    def blocked_operator(self) -> str:
        return self._p + "blocked:operator"

    @property
    def idle(self) -> str:
        """ZSET (ours) worker -> ms it last came up short: the lane's workers here with a free slot that listen
        on `worker_wake`; a create wakes (or hands its task to) the one idle longest (lua/fastpath.lua). A
        member is the worker instance id, or `functions.idle_member` for a worker that takes hand-offs."""
        return self._p + "idle"

    def idle_capable(self, caps_csv: str) -> str:
        """ZSET (ours) as `idle`, for the capability index of `caps_csv`: workers whose claim from it came up
        short; a create of work needing exactly those capabilities wakes (or hands it to) the one idle longest."""
        return self._p + "idle:caps:" + caps_csv

    def capable(self, caps_csv: str) -> str:
        """ZSET (ours) eid -> eligible score: executions requiring exactly `caps_csv` (sorted tokens), so
        capable workers find them without the others bouncing them (written at create / route unblock,
        pruned by claims; a hint: entries not in `eligible` are stale)."""
        return self._p + "caps:" + caps_csv


class FlowKeys:
    """Flow keys (§3.3) on the flow's partition."""

    __slots__ = ("flow_id", "tag", "_p")

    def __init__(self, n: int, flow_id: str) -> None:
        self.flow_id = flow_id
        self.tag = flow_tag(n)
        self._p = f"ff:flow:{self.tag}:{flow_id}:"

    @property
    def core(self) -> str:
        return self._p + "core"

    @property
    def members(self) -> str:
        return self._p + "members"

    def member(self, eid: str) -> str:
        return self._p + f"member:{eid}"

    def edge(self, edge_id: str) -> str:
        return self._p + f"edge:{edge_id}"

    def outgoing(self, eid: str) -> str:
        return self._p + f"out:{eid}"

    def incoming(self, eid: str) -> str:
        return self._p + f"in:{eid}"

    def edgegroup(self, eid: str) -> str:
        """HASH (v0.13): the inbound edge group of member `eid` — policy_variant, on_satisfied, k, n,
        succeeded/failed/skipped, group_state, the cancel_siblings_* fields while siblings are owed a cancel."""
        return self._p + f"edgegroup:{eid}"

    def edgegroup_cancelled(self, eid: str) -> str:
        """SET (ours): the upstream siblings member `eid`'s group cancelled (cancel_remaining), for the DAG view."""
        return self._p + f"edgegroup:{eid}:cancelled"

    @property
    def events(self) -> str:
        return self._p + "events"

    @property
    def summary(self) -> str:
        return self._p + "summary"

    def grant(self, mutation_id: str) -> str:
        return self._p + f"grant:{mutation_id}"

    @property
    def tags(self) -> str:
        """HASH `<caller>.<field>` labels (ff_set_flow_tags)."""
        return self._p + "tags"


class BudgetKeys:
    """Budget keys (§3.4) on budget partition M."""

    __slots__ = ("budget_id", "tag", "_p")

    def __init__(self, m: int, budget_id: str) -> None:
        self.budget_id = budget_id
        self.tag = budget_tag(m)
        self._p = f"ff:budget:{self.tag}:{budget_id}"

    @property
    def definition(self) -> str:
        return self._p

    @property
    def limits(self) -> str:
        return self._p + ":limits"

    @property
    def usage(self) -> str:
        return self._p + ":usage"

    @property
    def executions(self) -> str:
        return self._p + ":executions"

    @property
    def resets_index(self) -> str:
        return f"ff:idx:{self.tag}:budget_resets"

    @property
    def policies_index(self) -> str:
        return f"ff:idx:{self.tag}:budget_policies"

    def usage_dedup(self, dedup_id: str) -> str:
        return f"ff:usagededup:{self.tag}:{dedup_id}"

    def by_exec(self, eid: str) -> str:
        """HASH `<dim>` -> spend attributed to one execution (ff_record_spend / ff_release_budget)."""
        return f"{self._p}:by_exec:{eid}"

    @property
    def by_exec_index(self) -> str:
        """SET of the eids with a spend ledger on this budget."""
        return self._p + ":by_exec:index"


def budget_attach(tag: str, scope_type: str, scope_id: str) -> str:
    return f"ff:budget_attach:{tag}:{scope_type}:{scope_id}"


class QuotaKeys:
    """Quota keys (§3.5) on quota partition K."""

    __slots__ = ("quota_id", "tag", "_p")

    def __init__(self, k: int, quota_id: str) -> None:
        self.quota_id = quota_id
        self.tag = quota_tag(k)
        self._p = f"ff:quota:{self.tag}:{quota_id}"

    @property
    def definition(self) -> str:
        return self._p

    def window(self, dimension: str = "requests_per_window") -> str:
        return self._p + f":window:{dimension}"

    @property
    def concurrency(self) -> str:
        return self._p + ":concurrency"

    def admitted(self, eid: str) -> str:
        return self._p + f":admitted:{eid}"

    @property
    def admitted_set(self) -> str:
        return self._p + ":admitted_set"

    @property
    def policies_index(self) -> str:
        return f"ff:idx:{self.tag}:quota_policies"


def quota_attach(tag: str, scope_type: str, scope_id: str) -> str:
    return f"ff:quota_attach:{tag}:{scope_type}:{scope_id}"


# -- global / cross-partition keys (§3.6)
def lane_config(lane: str) -> str:
    return f"ff:lane:{lane}:config"


def lane_counts(lane: str) -> str:
    return f"ff:lane:{lane}:counts"


def worker(worker_instance_id: str) -> str:
    return f"ff:worker:{worker_instance_id}"


def worker_caps(worker_instance_id: str) -> str:
    return f"ff:worker:{worker_instance_id}:caps"


def worker_seen(worker_instance_id: str) -> str:
    """Our own key: a worker's last heartbeat (ms), kept an hour, so a vanished worker reads "gone"."""
    return f"ff:worker:{worker_instance_id}:seen"


def workers_capability(key: str, value: str) -> str:
    return f"ff:idx:workers:cap:{key}:{value}"


def namespace_executions(namespace: str) -> str:
    return f"ff:ns:{namespace}:executions"


def tag_index(namespace: str, key: str, value: str) -> str:
    return f"ff:tag:{namespace}:{key}:{value}"


def waitpoint_key_resolution(n: int, waitpoint_key: str) -> str:
    return f"ff:wpkey:{flow_tag(n)}:{waitpoint_key}"


def rotate_lock(n: int) -> str:
    return f"ff:sec:{flow_tag(n)}:rotate_lock"


def bulk_job(job_id: str) -> str:
    """HASH: progress of one bulk operator action (ours)."""
    return f"ff:bulk:{job_id}"


def bulk_results(job_id: str) -> str:
    """LIST of JSON per-item results of one bulk operator action (ours)."""
    return f"ff:bulk:{job_id}:results"


# -- flows (ours; never touched by the library's 47 functions)
def flows_created(n: int) -> str:
    """ZSET flow_id -> created_at ms on flow partition N: the newest-first flow listing source."""
    return f"ff:idx:{flow_tag(n)}:flows_created"


def cancel_backlog(n: int) -> str:
    """ZSET flow_id -> due ms: flows on partition N whose member cancels are not all acknowledged."""
    return f"ff:idx:{flow_tag(n)}:cancel_backlog"


def pending_cancel_groups(n: int) -> str:
    """SET (v0.13) of `<flow_id>|<downstream eid>`: edge groups on partition N whose siblings are owed a cancel."""
    return f"ff:pending_cancel_groups:{flow_tag(n)}"


def flow_pending_cancels(n: int, flow_id: str) -> str:
    """SET of member eids of a cancelled flow still to cancel (removed as each cancel is acknowledged)."""
    return f"ff:flow:{flow_tag(n)}:{flow_id}:pending_cancels"


# -- live streams (ours): one tailer per attempt stream across dashboard processes
def live_tail_lock(eid: str, i: int | str) -> str:
    """STRING + PX: the token of the process whose tailer follows attempt stream i (renewed while it runs)."""
    k = ExecKeys(eid)
    return f"ff:live:{k.tag}:{k.eid}:{i}:tailer"


def live_tail_want(eid: str, i: int | str) -> str:
    """STRING + PX: refreshed while any viewer watches attempt stream i; the tailer stops when it lapses."""
    k = ExecKeys(eid)
    return f"ff:live:{k.tag}:{k.eid}:{i}:want"


# -- budgets/quotas: read models of our own (never touched by the library's 47 functions)
def budget_blocked(b: BudgetKeys) -> str:
    """ZSET eid -> blocked_at ms: executions the scheduler blocked on this budget (dashboard, reset unblock)."""
    return b.definition + ":blocked"


def budget_samples(b: BudgetKeys) -> str:
    """STREAM of usage snapshots (one field per dimension), taken when usage changed: the burn rate."""
    return b.definition + ":samples"


def quota_blocked(q: QuotaKeys) -> str:
    """ZSET eid -> blocked_at ms: executions waiting for admission on this quota policy."""
    return q.definition + ":blocked"


def scanner_status(name: str) -> str:
    """HASH: a scanner's last tick time, lag and counters (ours; read by /metrics)."""
    return f"ff:scanner:{name}"


SCANNERS_INDEX = "ff:idx:scanners"


def metrics_family(name: str) -> str:
    """HASH (ours) of one metric family's counts summed over every process (ffcore.metrics; read by /metrics)."""
    return f"ff:metrics:{name}"


def lane_capsets(lane: str) -> str:
    """SET (ours) of the capability lists (sorted csv) `LaneKeys.capable` indexes exist for on `lane`."""
    return f"ff:lane:{lane}:capsets"


def lane_partitions(lane: str) -> str:
    """SET of partition indexes that hold executions of `lane` (ours; bounds listing fan-out)."""
    return f"ff:lane:{lane}:partitions"


def ring_turn(probe: str, lanes: Sequence[str]) -> str:
    """STRING (ours, short PX): which worker of the fleet serving `lanes` probes the whole partition ring
    for `probe` ("claim" or "reclaim") in the current interval."""
    return f"ff:ring:{probe}:{','.join(sorted(lanes))}"


#: Pattern of ff_create_fast's core templates (ours; built in lua/fastpath.lua as
#: `ff:tmpl:{fp:N}:core:<checksum of the template>`, one per partition).
CORE_TEMPLATES = "ff:tmpl:*"


def lane_wake(lane: str) -> str:
    """Pub/Sub channel: new eligible work on `lane` (ours; a hint that wakes idle workers at once)."""
    return f"ff:wake:{lane}"


def worker_wake(worker_instance_id: str) -> str:
    """Pub/Sub channel: work for this worker instance alone, message "<lane> <partition>" or a task handed to
    it (`functions.parse_handoff`) (ours; a create wakes one idle worker of its lane here instead of all of
    them on `lane_wake`)."""
    return f"ff:wake:worker:{worker_instance_id}"


# -- recurring schedules (ours; lua/schedule.lua; never touched by the library's 47 functions)
class SchedKeys:
    """A schedule's keys on the partition of its lane (`{fp:N}`), so a fire creates its execution in the
    same slot: `ff:sched:{fp:N}:<id>` (HASH definition + state) and `...:runs` (ZSET fire records)."""

    __slots__ = ("schedule_id", "tag", "_p", "n")

    def __init__(self, n: int, schedule_id: str) -> None:
        self.n = n
        self.schedule_id = schedule_id
        self.tag = flow_tag(n)
        self._p = f"ff:sched:{self.tag}:{schedule_id}"

    @property
    def definition(self) -> str:
        return self._p

    @property
    def runs(self) -> str:
        return self._p + ":runs"

    @property
    def due(self) -> str:
        """ZSET schedule id -> next fire time ms: the active schedules of partition N (the scanner's index)."""
        return f"ff:idx:{self.tag}:schedules_due"


def schedules_due(n: int) -> str:
    """ZSET schedule id -> next fire time ms of the active schedules on partition N."""
    return f"ff:idx:{flow_tag(n)}:schedules_due"


#: ZSET schedule id -> created_at ms: every schedule (the listing source).
SCHEDULES_INDEX = "ff:idx:schedules"
#: SET of the partitions that hold schedules (the scanner visits only these).
SCHEDULE_PARTITIONS = "ff:idx:schedule_partitions"


def schedule_names(namespace: str) -> str:
    """HASH schedule name -> id: names are unique per namespace."""
    return f"ff:ns:{namespace}:schedule_names"


# -- dashboard statistics (ours, issue #25): written by the stats sampler in ffscanners, never by a library function
#: STRING: the terminal-index time (ms) up to which the sampler has counted.
STATS_CURSOR = "ff:stats:cursor"
#: STRING with a TTL: held by the one sampler counting right now (several ffscanners processes may run).
STATS_LOCK = "ff:stats:lock"


def stats_minute(minute: int) -> str:
    """HASH of one minute (epoch ms // 60000): `done:<lane>`, `failed:<lane>`, `backlog:<lane>` counts and
    `lat:<lane>:<bucket>`, a histogram of claim-to-complete times (ffcore.engine.stats)."""
    return f"ff:stats:m:{minute}"


# -- upstream mode (issue #40): upstream v0.14+'s per-namespace worker registry (written by its ff_register_worker)
def upstream_workers_index(namespace: str) -> str:
    """SET of worker instance ids registered in `namespace` (upstream's `ff:idx:<ns>:workers`)."""
    return f"ff:idx:{namespace}:workers"


def upstream_worker_alive(namespace: str, worker_instance_id: str) -> str:
    """STRING with the registration TTL: present while the worker is alive (upstream's)."""
    return f"ff:worker:{namespace}:{worker_instance_id}:alive"


def upstream_worker_caps(namespace: str, worker_instance_id: str) -> str:
    """HASH worker_id, lanes_csv, caps_csv, ttl_ms, registered_at_ms, last_heartbeat_ms (upstream's)."""
    return f"ff:worker:{namespace}:{worker_instance_id}:caps"


# -- upstream mode: indexes of OUR OWN that upstream does not keep, under `ff:up:` (never a key upstream writes).
# Maintained by ffcore/upstream/reconcile.py from upstream's sets; deleting them all only costs one full pass.
#: SET of lane ids seen on upstream's executions.
UP_LANES = "ff:up:lanes"
#: SET of namespaces seen on upstream's executions (where the per-namespace worker registries are looked for).
UP_NAMESPACES = "ff:up:namespaces"


def up_created(n: int) -> str:
    """ZSET eid -> created_at ms of partition N's executions (from `all_executions`): the newest-first listing."""
    return f"ff:up:{flow_tag(n)}:created"


def up_flows(n: int) -> str:
    """ZSET flow_id -> created_at ms of partition N's flows (from `flow_index`)."""
    return f"ff:up:{flow_tag(n)}:flows"


def up_lane_partitions(lane: str) -> str:
    """SET of partitions holding executions of `lane` (bounds the listing's fan-out, like ours)."""
    return f"ff:up:lane:{lane}:partitions"


#: HASH of the reconciler's progress: `pass_at` (ms of the last completed pass), `executions`, `flows`.
UP_RECONCILE_STATUS = "ff:up:reconcile"
