"""Key builders are byte-exact with contract §3."""

from ffcore import keys
from ffcore.keys import BudgetKeys, ExecKeys, FlowKeys, PartitionKeys, QuotaKeys

EID = "{fp:24}:6ba7b810-9dad-11d1-80b4-00c04fd430c8"
P = "ff:exec:{fp:24}:{fp:24}:6ba7b810-9dad-11d1-80b4-00c04fd430c8:"


def test_execution_keys_carry_the_tag_twice():
    k = ExecKeys(EID)
    assert k.core == P + "core"
    assert k.payload == P + "payload"
    assert k.result == P + "result"
    assert k.policy == P + "policy"
    assert k.tags == P + "tags"
    assert k.lease_current == P + "lease:current"
    assert k.lease_history == P + "lease:history"
    assert k.claim_grant == P + "claim_grant"
    assert k.attempts == P + "attempts"
    assert k.suspension_current == P + "suspension:current"
    assert k.waitpoints == P + "waitpoints"
    assert k.signals == P + "signals"
    assert k.deps_meta == P + "deps:meta"
    assert k.dep_edge("e1") == P + "dep:e1"
    assert k.deps_unresolved == P + "deps:unresolved"
    assert k.deps_all_edges == P + "deps:all_edges"
    assert k.attempt(2) == "ff:attempt:{fp:24}:" + EID + ":2"
    assert k.attempt_usage(2) == "ff:attempt:{fp:24}:" + EID + ":2:usage"
    assert k.attempt_policy(0) == "ff:attempt:{fp:24}:" + EID + ":0:policy"
    assert k.stream(1) == "ff:stream:{fp:24}:" + EID + ":1"
    assert k.stream_meta(1) == "ff:stream:{fp:24}:" + EID + ":1:meta"


def test_partition_and_lane_indexes():
    ix = PartitionKeys(24)
    lane = ix.lane("default")
    assert lane.eligible == "ff:idx:{fp:24}:lane:default:eligible"
    assert lane.delayed == "ff:idx:{fp:24}:lane:default:delayed"
    assert lane.active == "ff:idx:{fp:24}:lane:default:active"
    assert lane.terminal == "ff:idx:{fp:24}:lane:default:terminal"
    assert lane.suspended == "ff:idx:{fp:24}:lane:default:suspended"
    assert lane.blocked_dependencies == "ff:idx:{fp:24}:lane:default:blocked:dependencies"
    assert lane.blocked_budget == "ff:idx:{fp:24}:lane:default:blocked:budget"
    assert lane.blocked_quota == "ff:idx:{fp:24}:lane:default:blocked:quota"
    assert lane.blocked_route == "ff:idx:{fp:24}:lane:default:blocked:route"
    assert lane.blocked_operator == "ff:idx:{fp:24}:lane:default:blocked:operator"
    assert ix.lease_expiry == "ff:idx:{fp:24}:lease_expiry"
    assert ix.worker_leases("wi1") == "ff:idx:{fp:24}:worker:wi1:leases"
    assert ix.worker_leases("") == "ff:idx:{fp:24}:worker::leases"
    assert ix.suspension_timeout == "ff:idx:{fp:24}:suspension_timeout"
    assert ix.pending_waitpoint_expiry == "ff:idx:{fp:24}:pending_waitpoint_expiry"
    assert ix.attempt_timeout == "ff:idx:{fp:24}:attempt_timeout"
    assert ix.execution_deadline == "ff:idx:{fp:24}:execution_deadline"
    assert ix.all_executions == "ff:idx:{fp:24}:all_executions"
    assert ix.flow_index == "ff:idx:{fp:24}:flow_index"
    assert ix.hmac_secrets == "ff:sec:{fp:24}:waitpoint_hmac"
    assert ix.noop == "ff:noop:{fp:24}"
    assert ix.idempotency("ns", "k1") == "ff:idem:{fp:24}:ns:k1"
    assert ix.waitpoint("w") == "ff:wp:{fp:24}:w"
    assert ix.waitpoint_signals("w") == "ff:wp:{fp:24}:w:signals"
    assert ix.waitpoint_condition("w") == "ff:wp:{fp:24}:w:condition"
    assert ix.signal("s") == "ff:signal:{fp:24}:s"
    assert ix.signal_payload("s") == "ff:signal:{fp:24}:s:payload"
    assert ix.signal_dedup("w", "k") == "ff:sigdedup:{fp:24}:w:k"


def test_flow_budget_quota_keys():
    f = FlowKeys(24, "F")
    assert (f.core, f.members, f.member("E")) == ("ff:flow:{fp:24}:F:core", "ff:flow:{fp:24}:F:members",
                                                   "ff:flow:{fp:24}:F:member:E")
    assert f.edge("e") == "ff:flow:{fp:24}:F:edge:e"
    assert f.outgoing("E") == "ff:flow:{fp:24}:F:out:E"
    assert f.incoming("E") == "ff:flow:{fp:24}:F:in:E"
    assert (f.events, f.summary, f.grant("m")) == ("ff:flow:{fp:24}:F:events", "ff:flow:{fp:24}:F:summary",
                                                   "ff:flow:{fp:24}:F:grant:m")
    b = BudgetKeys(24, "B")
    assert (b.definition, b.limits, b.usage, b.executions) == (
        "ff:budget:{b:24}:B", "ff:budget:{b:24}:B:limits", "ff:budget:{b:24}:B:usage",
        "ff:budget:{b:24}:B:executions")
    assert b.resets_index == "ff:idx:{b:24}:budget_resets"
    assert b.policies_index == "ff:idx:{b:24}:budget_policies"
    assert b.usage_dedup("d") == "ff:usagededup:{b:24}:d"
    q = QuotaKeys(13, "Q")
    assert q.definition == "ff:quota:{q:13}:Q"
    assert q.window() == "ff:quota:{q:13}:Q:window:requests_per_window"
    assert q.concurrency == "ff:quota:{q:13}:Q:concurrency"
    assert q.admitted("E") == "ff:quota:{q:13}:Q:admitted:E"
    assert q.admitted_set == "ff:quota:{q:13}:Q:admitted_set"
    assert q.policies_index == "ff:idx:{q:13}:quota_policies"


def test_global_keys():
    assert keys.CONFIG_PARTITIONS == "ff:config:partitions"
    assert keys.WORKERS_INDEX == "ff:idx:workers"
    assert keys.worker_caps("wi") == "ff:worker:wi:caps"
    assert keys.lane_config("l") == "ff:lane:l:config"
    assert keys.budget_attach("{b:1}", "lane", "x") == "ff:budget_attach:{b:1}:lane:x"
    assert keys.quota_attach("{q:1}", "lane", "x") == "ff:quota_attach:{q:1}:lane:x"
    assert keys.namespace_executions("ns") == "ff:ns:ns:executions"
    assert keys.tag_index("ns", "k", "v") == "ff:tag:ns:k:v"
    assert keys.waitpoint_key_resolution(3, "wk") == "ff:wpkey:{fp:3}:wk"
    assert keys.workers_capability("k", "v") == "ff:idx:workers:cap:k:v"
    assert keys.DAG_COMPLETIONS_CHANNEL == "ff:dag:completions"
