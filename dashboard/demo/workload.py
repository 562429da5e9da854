"""The demo workload generator: a steady, varied stream of executions and flows."""

from __future__ import annotations

import logging
import random
import threading

from ffcore import audit
from ffcore.backend import Backend
from ffcore.budgets.budgets import create_budget
from ffcore.budgets.quotas import create_quota_policy
from ffcore.execution.client import Client
from ffcore.flows.flows import Flows
from ffcore.functions import Signal
from ffcore.policy import Backoff, Policy, RetryPolicy
from ffcore.suspension.inbox import InboxQuery, open_waitpoints
from ffcore.suspension.signals import Signals

from . import schedules as demo_schedules
from .ids import EMAIL_QUOTA, TOKEN_BUDGET

log = logging.getLogger("dashboard.demo")

RETRY = Policy(retry=RetryPolicy(max_retries=2, backoff=Backoff(kind="fixed", delay_ms=3000)))


def setup(backend: Backend) -> None:
    """The demo's budget and e-mail quota. The budget resets every minute and is sized for about a minute of LLM
    runs (~7-9 of ~1,200 tokens), so its gauge keeps filling and emptying and only a busy minute touches the hard limit,
    while most runs finish (#25: it used to run dry in a minute and stay dry for four)."""
    create_budget(backend, budget_id=TOKEN_BUDGET, hard={"tokens": 14_000}, soft={"tokens": 9_000},
                  reset_interval_ms=60_000, scope_type="demo", scope_id="llm")
    create_quota_policy(backend, quota_id=EMAIL_QUOTA, window_seconds=10, max_requests_per_window=5,
                        max_concurrent=2)
    demo_schedules.setup(backend)


def fan_out_flow(flows: Flows) -> None:
    fid = flows.create(kind="fan-out")
    members = [{"kind": "split", "lane": "demo", "payload": b'{"file": "orders.csv"}'}]
    members += [{"kind": "chunk", "lane": "demo", "payload": f'{{"chunk": {i}}}'.encode()} for i in range(4)]
    members += [{"kind": "merge", "lane": "demo"}]
    flows.build(fid, members, [(0, i) for i in range(1, 5)] + [(i, 5) for i in range(1, 5)])


#: A quorum edge group with sibling cancel (v0.13): publish once two of three mirrors have the release.
QUORUM = {"kind": "quorum", "k": 2, "on_satisfied": "cancel_remaining"}
MIRRORS = ("eu", "us", "ap")


def mirror_flow(flows: Flows) -> str:
    """Three mirror fetches into one publish that runs at the second success; the slowest fetch still running then
    is cancelled (the flow page's edge-group section shows the quorum, the count and the cancelled sibling)."""
    fid = flows.create(kind="mirror-quorum")
    members = [{"kind": "mirror", "lane": "demo", "payload": f'{{"mirror": "{m}"}}'.encode()} for m in MIRRORS]
    members.append({"kind": "publish", "lane": "demo", "payload": b'{"release": "v1.4.2"}'})
    flows.build(fid, members, [(i, len(MIRRORS)) for i in range(len(MIRRORS))], groups={len(MIRRORS): QUORUM})
    return fid


def pipeline_flow(flows: Flows, failing: bool) -> None:
    fid = flows.create(kind="pipeline")
    steps = [{"kind": "extract", "lane": "demo"},
             {"kind": "validate" if failing else "transform", "lane": "demo", "policy": None if failing else RETRY},
             {"kind": "load", "lane": "demo"}, {"kind": "load", "lane": "demo", "tags": {"target": "warehouse"}}]
    flows.build(fid, steps, [(0, 1), (1, 2), (2, 3)])


def auto_approve(backend: Backend) -> None:
    """A demo reviewer approves the longest-waiting approval (the others stay in the inbox for a human), so the
    audit log and the approvals lane keep moving too. Audited like an operator's signal."""
    page = open_waitpoints(backend, InboxQuery(lane="approvals", state="active", signal="approved", limit=1),
                           ["approvals"])
    if not page.rows:
        return
    row = page.rows[0]
    sig = Signal("approved", category="operator", source_type="operator", source_identity="demo-reviewer",
                 payload=b'{"approved": true}')
    out = Signals(backend).deliver_with_stored_token(row.execution_id, row.waitpoint_id, sig)
    audit.record(backend, actor="demo-reviewer", action="signal", target=row.execution_id,
                 reason="demo: approved automatically", outcome="ok",
                 detail=f"waitpoint {row.waitpoint_id}: signal 'approved' -> {out.effect}")


def tick(backend: Backend, n: int) -> None:
    c, flows = Client(backend), Flows(backend)
    if n % 30 == 25:  # once a minute
        auto_approve(backend)
    if n % 10 == 0:
        fan_out_flow(flows)
    if n % 12 == 3:
        pipeline_flow(flows, failing=n % 24 == 3)
    if n % 10 == 6:
        mirror_flow(flows)
    if n % 15 == 5:
        c.create(kind="approve", lane="approvals", payload=b'{"request": "refund #%d", "amount": 42}' % n,
                 tags={"team": "billing"})
    if n % 4 == 1:
        c.create(kind="llm", lane="llm", payload=b'{"prompt": "Summarise the incident report"}',
                 policy=Policy(budget_ids=(TOKEN_BUDGET,)))
    if random.random() < 0.7:  # ~4.7 e-mails per 10 s against a 5-per-10 s quota: bursts wait, the backlog drains
        c.create_many([{"kind": "email", "lane": "emails", "payload": b'{"to": "user@example.com"}',
                        "policy": Policy(quota_policy_id=EMAIL_QUOTA)} for _ in range(random.choice((1, 1, 2)))])
    if n % 6 == 2:
        c.create(kind="reminder", lane="demo", delay_until=backend.now_ms() + 30_000,
                 payload=b'{"note": "follow up"}')


def run(backend: Backend, stop: threading.Event, interval_s: float = 2.0) -> None:
    setup(backend)
    n = 0
    while not stop.is_set():
        try:
            tick(backend, n)
        except Exception:  # the demo keeps going; the dashboard shows whatever failed
            log.exception("demo tick failed")
        n += 1
        stop.wait(interval_s)
