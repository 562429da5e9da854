"""An execution's History: one ordered list of what happened to it, read from the records the engine keeps —
the core hash, the lease-history stream, the attempts, the signals and waitpoints, the attempt streams' meta —
and the few of our own (ffcore/execution/journal.py: progress, spend, backoff, operator actions, renewals).

Two pipelined round trips whatever the length; the list is then paged with an opaque cursor (the position
of the next entry). Renewals are folded into one entry per attempt, frames counted per attempt."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from ..backend import Backend
from ..keys import ExecKeys, PartitionKeys
from ..reads import decode_map, text
from .explain import fmt_ms

#: Entries per page (the page and the API's default).
PAGE_SIZE = 100
#: Largest page the API serves.
PAGE_MAX = 500
#: Actor of what a scanner did (lease expiry, timeouts, delayed promotion).
SCANNER = "scanner"

#: Lease-history `released` reasons -> (kind, title).
RELEASED = {"completed": ("completed", "Completed"), "failed_terminal": ("failed", "Failed"),
            "failed_retry_scheduled": ("failed", "Failed, retry scheduled"), "suspend": ("suspended", "Suspended"),
            "cancelled": ("cancelled", "Cancelled"), "worker_delay": ("delayed", "Delayed by its worker"),
            "waiting_children": ("delayed", "Waiting for children")}

#: Audited action name fragments -> entry kind (the doors name actions change_priority, set_tags, …).
OPERATOR_KINDS = (("cancel", "cancelled"), ("replay", "replayed"), ("revoke", "revoked"), ("priority", "priority"),
                  ("tag", "tags"), ("take", "taken"))

#: Order of kinds within one millisecond (default 5: what happens while an attempt runs). Lease events keep
#: their stream order; the rest is merged around them by (time, rank).
RANK = {"created": 0.0, "flow": 1.0, "eligible": 1.0, "delayed": 1.0, "claimed": 4.0, "reclaimed": 4.0,
        "completed": 7.0, "failed": 7.0, "suspended": 7.0, "cancelled": 7.0, "expired": 7.0, "revoked": 7.0,
        "released": 7.0, "waitpoint": 7.5, "signal": 8.0, "backoff": 8.0, "replayed": 8.0, "resumed": 8.5}


def _rank(e: Entry) -> float:
    if e.kind == "claimed" and e.title.endswith("(resumed)"):
        return 9.0  # a resumed claim follows the resume that allowed it
    return RANK.get(e.kind, 5.0)


def _merge(lease: list[Entry], others: list[Entry]) -> list[Entry]:
    others = sorted(others, key=lambda e: (e.ts, _rank(e)))
    out: list[Entry] = []
    i = j = 0
    while i < len(lease) or j < len(others):
        if j < len(others) and (i >= len(lease) or (others[j].ts, _rank(others[j])) < (lease[i].ts, _rank(lease[i]))):
            out.append(others[j])
            j += 1
        else:
            out.append(lease[i])
            i += 1
    return out


@dataclass(frozen=True)
class Entry:
    """One thing that happened: when (ms), what (`kind`, a stable word; `title`, for people), who, details."""

    ts: int
    kind: str
    title: str
    actor: str = ""
    detail: str = ""
    attempt: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"ts": self.ts, "kind": self.kind, "title": self.title, "actor": self.actor, "detail": self.detail,
                "attempt": self.attempt}


@dataclass(frozen=True)
class HistoryPage:
    entries: list[Entry]
    #: Cursor of the next page ("" on the last one).
    next_cursor: str
    total: int


def _int(v: Any) -> int:
    try:
        return int(text(v) or 0)
    except ValueError:
        return 0


def _stream(raw: list[Any]) -> list[tuple[int, dict[str, str]]]:
    return [(_int(text(sid).split("-")[0]), decode_map(f)) for sid, f in raw or []]


def _max_retries(policy_raw: Any) -> int | None:
    try:
        rp = json.loads(text(policy_raw) or "{}").get("retry_policy")
    except (ValueError, AttributeError):
        return None
    if not isinstance(rp, dict):
        return None
    m = rp.get("max_retries", 3)
    return m if isinstance(m, int) else None


def read(backend: Backend, eid: str) -> list[Entry] | None:
    """Every entry, oldest first; None when the execution does not exist."""
    k = ExecKeys(eid)
    pipe = backend.client.pipeline(transaction=False)
    pipe.hgetall(k.core)
    pipe.zrange(k.attempts, 0, -1)
    pipe.xrange(k.lease_history)
    pipe.zrange(k.signals, 0, -1)
    pipe.smembers(k.waitpoints)
    pipe.xrange(k.journal)
    pipe.hgetall(k.renewals)
    pipe.zscore(PartitionKeys(k.eid.partition_index).execution_deadline, eid)
    pipe.get(k.policy)
    core_raw, attempt_ids, lease_raw, signal_ids, wp_ids, journal_raw, renewals_raw, deadline, policy = pipe.execute()
    if not core_raw:
        return None
    core = decode_map(core_raw)
    idxs = sorted(_int(a) for a in attempt_ids)
    sigs, wps = [text(s) for s in signal_ids], sorted(text(w) for w in wp_ids)
    ix = k.idx
    pipe = backend.client.pipeline(transaction=False)
    for i in idxs:
        pipe.hgetall(k.attempt(i))
        pipe.hmget(k.stream_meta(i), "frame_count", "created_at", "last_frame_at")
    for s in sigs:
        pipe.hgetall(ix.signal(s))
    for w in wps:
        pipe.hgetall(ix.waitpoint(w))
        pipe.hgetall(ix.waitpoint_condition(w))
    got = pipe.execute() if (idxs or sigs or wps) else []
    attempts = {i: decode_map(got[2 * n]) for n, i in enumerate(idxs)}
    frames = {i: [_int(v) for v in got[2 * n + 1]] for n, i in enumerate(idxs)}
    at = 2 * len(idxs)
    signals = [decode_map(h) for h in got[at:at + len(sigs)]]
    at += len(sigs)
    waitpoints = [(decode_map(got[at + 2 * n]), decode_map(got[at + 2 * n + 1])) for n in range(len(wps))]

    out: list[Entry] = []
    now = int(time.time() * 1000)  # (only tells whether a delay is over: no round trip for the server's clock)
    starts = [_int(a.get("started_at")) for a in attempts.values() if _int(a.get("started_at"))]
    out += _created(core, deadline, now, min(starts, default=0))
    notes = _stream(journal_raw)
    # A retry's backoff belongs to the failure it follows (the note is written a moment after it).
    backoffs = {f["attempt"]: _int(f.get("until")) for _, f in notes
                if f.get("event") == "backoff" and f.get("attempt")}
    lease = _lease_events(_stream(lease_raw), attempts, _max_retries(policy), backoffs)
    lease = [Entry(e.ts, e.kind, e.title, core.get("cancelled_by", e.actor), core.get("cancellation_reason", ""),
                   e.attempt) if e.kind == "cancelled" else e for e in lease]
    out += _attempt_facts(attempts, frames, decode_map(renewals_raw))
    out += _suspension_facts(waitpoints, signals)
    out += _journal(notes, now)
    if any(e.kind == "priority" for e in out):  # the core holds the current priority, not the one it was created with
        out[0] = Entry(out[0].ts, "created", "Created", out[0].actor, out[0].detail.split(" · ", 1)[1])
    if core.get("terminal_outcome") == "cancelled" and not any(e.kind == "cancelled" for e in out + lease):
        out.append(Entry(_int(core.get("completed_at")), "cancelled", "Cancelled", core.get("cancelled_by", ""),
                         core.get("cancellation_reason", "")))
    return _merge(lease, out)


def page(backend: Backend, eid: str, cursor: str = "", limit: int = PAGE_SIZE) -> HistoryPage | None:
    """One page of `read`; `cursor` is a previous page's `next_cursor` (a bad one starts over)."""
    entries = read(backend, eid)
    if entries is None:
        return None
    start = int(cursor) if cursor.isdigit() else 0
    end = start + max(1, min(limit, PAGE_MAX))
    return HistoryPage(entries[start:end], str(end) if end < len(entries) else "", len(entries))


def _created(core: dict[str, str], deadline: Any, now_ms: int, first_start: int) -> list[Entry]:
    created = _int(core.get("created_at"))
    parts = [f"priority {core.get('priority', '0')}", f"lane {core.get('lane_id', '')}"]
    delay = _int(core.get("delay_until"))
    if deadline:
        parts.append(f"deadline {fmt_ms(int(float(deadline)))}")
    out = [Entry(created, "created", "Created", core.get("creator_identity", ""), " · ".join(parts))]
    if core.get("flow_id"):
        out.append(Entry(created, "flow", "Member of a flow", detail=core["flow_id"]))
    # delay_until is the last delay set: it was the creation's if no attempt started before it ended.
    if delay > created and (not first_start or first_start >= delay):
        out.append(Entry(created, "delayed", "Delayed", detail=f"until {fmt_ms(delay)}"))
        if delay <= now_ms:
            out.append(Entry(delay, "eligible", "Eligible", SCANNER, "delay over"))
    elif not core.get("flow_id"):  # (a flow member waits for its upstreams: the flow's page tells when)
        out.append(Entry(created, "eligible", "Eligible"))
    return out


def _lease_events(events: list[tuple[int, dict[str, str]]], attempts: dict[int, dict[str, str]],
                  max_retries: int | None, backoffs: dict[str, int]) -> list[Entry]:
    out: list[Entry] = []
    retries = 0
    for ts, f in events:
        ev, idx = f.get("event", ""), f.get("attempt_index") or f.get("new_attempt_index") or ""
        i = _int(idx) if idx else None
        att = attempts.get(i, {}) if i is not None else {}
        who = f.get("worker_instance_id") or att.get("worker_instance_id") or f.get("worker_id", "")
        if ev == "acquired":
            resumed = f.get("reason") == "claim_resumed"
            out.append(Entry(ts, "claimed", "Claimed (resumed)" if resumed else "Claimed",
                             who, f"lease epoch {f.get('lease_epoch', '')} · attempt {idx}", i))
        elif ev == "released":
            reason = f.get("reason", "")
            kind, title = RELEASED.get(reason, ("released", "Lease released"))
            detail = "" if reason in RELEASED else reason
            if kind == "failed":
                cat, why = att.get("failure_category", ""), att.get("failure_reason", "")
                # (the SDK's reason already starts with the exception type it uses as the category)
                detail = why if cat and why.startswith(cat) else " · ".join(x for x in (cat, why) if x)
                if reason == "failed_retry_scheduled":
                    retries += 1
                    title = f"Failed, retry {retries} of {max_retries}" if max_retries else title
                    if backoffs.get(idx):
                        detail += f" · backing off until {fmt_ms(backoffs[idx])}"
            if reason.startswith("expired:"):
                kind, title, who = "expired", "Lease ended by a timeout", SCANNER
            out.append(Entry(ts, kind, title, who if kind != "expired" else SCANNER, detail, i))
        elif ev == "expired":
            out.append(Entry(ts, "expired", "Lease expired", SCANNER, f"held by {who} · epoch "
                             f"{f.get('lease_epoch', '')}", i))
        elif ev == "revoked":
            out.append(Entry(ts, "revoked", "Lease revoked", "operator", f.get("reason", ""), i))
        elif ev == "reclaimed":
            out.append(Entry(ts, "reclaimed", "Reclaimed", who, f"lease epoch {f.get('new_lease_epoch', '')} · "
                             f"attempt {idx}", i))
        elif ev == "replay_initiated":
            out.append(Entry(ts, "replayed", "Replayed", "", f"replay {f.get('replay_count', '')}"))
        else:
            out.append(Entry(ts, ev or "lease", ev.replace("_", " ").capitalize(), who, "", i))
    return out


def _attempt_facts(attempts: dict[int, dict[str, str]], frames: dict[int, list[int]],
                   renewals: dict[str, str]) -> list[Entry]:
    out: list[Entry] = []
    for i in sorted(attempts):
        who = attempts[i].get("worker_instance_id", "")
        n = _int(renewals.get(f"{i}:n"))
        if n:
            first, last = _int(renewals.get(f"{i}:first")), _int(renewals.get(f"{i}:last"))
            out.append(Entry(last, "renewed", f"Renewed {n}×", who, f"between {fmt_ms(first)} and {fmt_ms(last)}", i))
        count, created, last_frame = (frames.get(i) or [0, 0, 0]) + [0, 0, 0][len(frames.get(i) or []):]
        if count:
            out.append(Entry(last_frame or created, "frames", f"{count} frame{'s' if count != 1 else ''} appended",
                             who, f"since {fmt_ms(created)}" if created else "", i))
    return out


def _suspension_facts(waitpoints: list[tuple[dict[str, str], dict[str, str]]],
                      signals: list[dict[str, str]]) -> list[Entry]:
    out: list[Entry] = []
    for wp, cond in waitpoints:
        if not wp:
            continue
        i = _int(wp.get("attempt_index")) if wp.get("attempt_index") else None
        names = [v for f, v in sorted(cond.items()) if f.startswith("matcher:") and f.endswith(":name")]
        mode = cond.get("match_mode", "")
        cond_text = f"{mode} of {', '.join(names)}" if names else "any signal"
        out.append(Entry(_int(wp.get("activated_at") or wp.get("created_at")), "waitpoint", "Waiting on a waitpoint",
                         "", f"{wp.get('waitpoint_key', '')} · {cond_text}", i))
        if wp.get("closed_at"):
            resumed = wp.get("close_reason") == "resumed"
            out.append(Entry(_int(wp["closed_at"]), "resumed" if resumed else "waitpoint",
                             "Resume condition satisfied" if resumed else "Waitpoint closed", "",
                             wp.get("close_reason", ""), i))
    for s in signals:
        if not s:
            continue
        out.append(Entry(_int(s.get("accepted_at") or s.get("created_at")), "signal",
                         f"Signal {s.get('signal_name', '')!r} delivered", s.get("source_identity", "") or
                         s.get("source_type", ""), f"waitpoint {s.get('target_waitpoint_id', '')} · "
                         f"{(s.get('observed_effect') or '').replace('_', ' ')}"))
    return out


def _journal(entries: list[tuple[int, dict[str, str]]], now_ms: int) -> list[Entry]:
    out: list[Entry] = []
    for ts, f in entries:
        ev = f.get("event", "")
        i = _int(f["attempt"]) if f.get("attempt", "").isdigit() else None
        if ev == "progress":
            pct = f"{f.get('pct')}%" if f.get("pct") else ""
            out.append(Entry(ts, "progress", "Progress", f.get("actor", ""),
                             " ".join(x for x in (pct, f.get("message", "")) if x), i))
        elif ev == "backoff":
            until = _int(f.get("until"))  # (shown on the failure it follows)
            if until <= now_ms:
                out.append(Entry(until, "eligible", "Eligible again", SCANNER, "backoff over"))
        elif ev == "spend":
            outcome = f.get("outcome", "")
            out.append(Entry(ts, "spend", "Spend recorded", "", f"budget {f.get('budget', '')} · {f.get('deltas', '')}"
                             + (f" · {outcome}" if outcome not in ("", "ok") else "")))
        elif ev == "operator":
            action = f.get("action", "")
            kind = next((k for word, k in OPERATOR_KINDS if word in action), "operator")
            parts = [x for x in (f.get("detail", ""), f"reason: {f['reason']}" if f.get("reason") else "",
                                 "" if f.get("outcome") == "ok" else f.get("outcome", "")) if x]
            out.append(Entry(ts, kind, f"Operator: {action.replace('_', ' ')}", f.get("actor", ""), " · ".join(parts)))
        else:
            out.append(Entry(ts, ev or "note", ev.replace("_", " ").capitalize(), f.get("actor", "")))
    return out
