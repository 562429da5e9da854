"""Read models: waitpoints inbox and the execution detail's suspension section (never a token)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from ffcore.backend import Backend
from ffcore.execution.client import Client, Execution
from ffcore.keys import ExecKeys
from ffcore.reads import decode_map, text
from ffcore.suspension.conditions import composite_matchers, describe_json
from ffcore.suspension.inbox import InboxPage, InboxQuery, WaitpointRow, open_waitpoints
from ffcore.suspension.signals import composite_signal_ids, matcher_names, suspension_waitpoint_ids
from ffcore.upstream.reads_waitpoints import composite_tree

from .sections import ValueView, detail_section, view_bytes

#: Signals shown per waitpoint on the execution page (newest first).
SIGNALS_SHOWN = 50
#: Waitpoint fields the dashboard may read: everything but `waitpoint_token`.
WP_FIELDS = ("waitpoint_id", "waitpoint_key", "state", "created_at", "activated_at", "satisfied_at", "closed_at",
             "expires_at", "close_reason", "signal_count", "matched_signal_count", "last_signal_at")


@dataclass
class InboxView:
    query: InboxQuery
    page: InboxPage
    lanes: list[str]
    now_ms: int


def inbox(backend: Backend, q: InboxQuery) -> InboxView:
    lanes = Client(backend).lanes()
    return InboxView(q, open_waitpoints(backend, q, lanes), lanes, backend.now_ms())


@dataclass(frozen=True)
class Matcher:
    name: str
    satisfied: bool
    signal_id: str


@dataclass(frozen=True)
class SignalView:
    signal_id: str
    name: str
    category: str
    source_type: str
    source_identity: str
    accepted_at: str
    effect: str
    matched: bool
    payload: ValueView


@dataclass
class SuspensionView:
    #: The current suspension is open (the execution is suspended); otherwise it is the last, closed one.
    open: bool
    execution_id: str
    record: dict[str, str]
    waitpoint: dict[str, str]
    matchers: list[Matcher]
    match_mode: str
    minimum: str
    signals: list[SignalView]
    pending: list[WaitpointRow] = field(default_factory=list)
    now_ms: int = 0
    #: A composite's other waitpoints (key, id, state, signal counts; never the token).
    others: list[dict[str, str]] = field(default_factory=list)
    #: Idempotency key for the signal forms on the page: a double submit is delivered once.
    form_token: str = field(default_factory=lambda: uuid.uuid4().hex)

    @property
    def expected_name(self) -> str:
        """The first signal name still awaited: the signal form's default name."""
        waiting = [m.name for m in self.matchers if m.name and not m.satisfied]
        return waiting[0] if waiting else next((m.name for m in self.matchers if m.name), "")

    @property
    def waitpoint_id(self) -> str:
        return self.record.get("waitpoint_id", "")

    @property
    def condition_words(self) -> str:
        """The resume condition in words ("any of approve, reject", "2 of 3 approvers: approve", ...)."""
        return describe_json(self.record.get("resume_condition_json", ""))


@detail_section("suspension")
def suspension(backend: Backend, ex: Execution) -> SuspensionView | None:
    """The current (or last) suspension, its condition, the signals its waitpoint received and which
    matched, and the execution's pending waitpoints. Three pipelines."""
    k = ExecKeys(ex.execution_id)
    record = decode_map(backend.client.hgetall(k.suspension_current))
    pending = open_waitpoints(backend, InboxQuery(execution=ex.execution_id, state="pending"), []).rows
    wid = record.get("waitpoint_id", "")
    if not record and not pending:
        return None
    wp: dict[str, str] = {}
    cond: dict[str, str] = {}
    entries: list[tuple[str, dict[str, str]]] = []
    if wid:
        pipe = backend.client.pipeline(transaction=False)
        pipe.hmget(k.idx.waitpoint(wid), WP_FIELDS)
        pipe.hgetall(k.idx.waitpoint_condition(wid))
        pipe.xrevrange(k.idx.waitpoint_signals(wid), "+", "-", count=SIGNALS_SHOWN)
        wp_raw, cond_raw, stream = pipe.execute()
        wp = dict(zip(WP_FIELDS, map(text, wp_raw), strict=True))
        cond = decode_map(cond_raw)
        entries = [(text(i), decode_map(f)) for i, f in stream]
    names = matcher_names(cond)
    matchers = [Matcher(n, cond.get(f"matcher:{i}:satisfied") == "1", cond.get(f"matcher:{i}:signal_id", ""))
                for i, n in enumerate(names)]
    matched_ids = {m.signal_id for m in matchers if m.satisfied}
    tree, upstream = composite_tree(record, cond)
    if tree:  # several waitpoints (or upstream's tree): each leaf's matchers, by key, from the satisfied set
        tokens = {text(t) for t in backend.client.smembers(k.suspension_satisfied_set)}
        matchers = [Matcher(f"{n or 'any signal'} on {key}", done, "")
                    for key, n, done in composite_matchers(tree, tokens, upstream=upstream)]
        matched_ids = set(composite_signal_ids(record.get("all_satisfier_signals", "")))
        matched_ids |= {text(t) for t in backend.client.smembers(k.suspension_satisfied_signals)}
    signals: list[SignalView] = []
    ids = [f.get("signal_id", "") for _, f in entries]
    if ids:
        pipe = backend.client.pipeline(transaction=False)
        for sid in ids:
            pipe.hget(k.idx.signal(sid), "observed_effect")
            pipe.get(k.idx.signal_payload(sid))
        raw = pipe.execute()
        for i, (_, f) in enumerate(entries):
            signals.append(SignalView(
                ids[i], f.get("signal_name", ""), f.get("signal_category", ""), f.get("source_type", ""),
                f.get("source_identity", ""), f.get("accepted_at", ""), text(raw[2 * i]), ids[i] in matched_ids,
                view_bytes(raw[2 * i + 1])))
    others: list[dict[str, str]] = []
    extra_ids = suspension_waitpoint_ids({"additional_waitpoints_json": record.get("additional_waitpoints_json", "")})
    if extra_ids:
        pipe = backend.client.pipeline(transaction=False)
        for w in extra_ids:
            pipe.hmget(k.idx.waitpoint(w), WP_FIELDS)
        others = [dict(zip(WP_FIELDS, map(text, raw), strict=True)) for raw in pipe.execute()]
    return SuspensionView(ex.core.get("lifecycle_phase") == "suspended" and not record.get("closed_at"),
                          ex.execution_id, record, wp, matchers, cond.get("match_mode", ""),
                          cond.get("minimum_signal_count", ""), signals, pending, backend.now_ms(), others)
