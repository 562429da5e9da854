"""Signals and waitpoints from the caller's side: deliver (with a token), resume, close, list, rotate.

    sig = Signals(backend)
    out = sig.deliver(eid, waitpoint_id, Signal("approved", payload=b'{"by": "ann"}'), token)
    out.resumed            # True when this signal satisfied the resume condition

Tokens are bearer credentials (contract §8): `pending_waitpoints()` returns them to the program that
hands them to a signaller; `deliver_with_stored_token()` is for trusted server-side callers (the
dashboard) that act without ever showing a token to a person.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ffcore import events, wake
from ffcore import functions as F
from ffcore.backend import Backend
from ffcore.errors import ERRORS, ExecutionNotFound, InvalidInput
from ffcore.functions import Signal
from ffcore.ids import ExecutionId, new_uuid, parse_signal_id, parse_waitpoint_id
from ffcore.keys import ExecKeys
from ffcore.reads import core_refs, text
from ffcore.suspension import hmac_secrets

#: Effects of an accepted signal (contract §4.3 `observed_effect`).
RESUMED = "resume_condition_satisfied"
APPENDED = "appended_to_waitpoint"
NO_OP = "no_op"
BUFFERED = "buffered_for_pending_waitpoint"

WP_FIELDS = ("waitpoint_id", "execution_id", "attempt_index", "suspension_id", "waitpoint_key", "waitpoint_token",
             "state", "created_at", "activated_at", "satisfied_at", "closed_at", "expires_at", "close_reason",
             "signal_count", "matched_signal_count", "last_signal_at")


@dataclass(frozen=True)
class SignalOutcome:
    signal_id: str
    #: One of RESUMED, APPENDED, NO_OP, BUFFERED, or "duplicate".
    effect: str
    duplicate: bool = False

    @property
    def resumed(self) -> bool:
        return self.effect == RESUMED


@dataclass(frozen=True)
class PendingWaitpoint:
    """An open (pending or active) waitpoint of one execution, token included (server.md §2.3 #9)."""

    waitpoint_id: str
    waitpoint_key: str
    state: str
    waitpoint_token: str
    execution_id: str
    required_signal_names: list[str] = field(default_factory=list)
    created_at: int = 0
    activated_at: int | None = None
    expires_at: int | None = None

    @property
    def token(self) -> str:
        return self.waitpoint_token

    @property
    def token_kid(self) -> str:
        """The secret generation that minted the token (`<kid>:<digest>`)."""
        return self.waitpoint_token.partition(":")[0]

    @property
    def token_fingerprint(self) -> str:
        """The first 16 hex of the token's digest: enough to tell tokens apart, never enough to use one."""
        return self.waitpoint_token.partition(":")[2][:16]


def _int(v: str) -> int | None:
    return int(v) if v.lstrip("-").isdigit() else None


def read_waitpoint(backend: Backend, eid: ExecutionId, waitpoint_id: str) -> dict[str, str]:
    """The waitpoint hash, or {} when it does not exist or belongs to another execution."""
    parse_waitpoint_id(waitpoint_id)
    vals = backend.client.hmget(ExecKeys(eid).idx.waitpoint(waitpoint_id), WP_FIELDS)
    wp = dict(zip(WP_FIELDS, map(text, vals), strict=True))
    return wp if wp["execution_id"] == eid else {}


def waitpoint_token(backend: Backend, eid: ExecutionId, waitpoint_id: str) -> str | None:
    """The raw token of an open (pending or active) waitpoint of `eid`, or None. A credential: callers
    hand it only to whoever may signal (the REST admin route)."""
    wp = read_waitpoint(backend, eid, waitpoint_id)
    if wp.get("state") not in ("pending", "active") or not wp.get("waitpoint_token"):
        return None
    return wp["waitpoint_token"]


def composite_signal_ids(all_satisfier_signals: str) -> list[str]:
    """The signal ids that satisfied a composite suspension (its record's `all_satisfier_signals`, a JSON
    list kept by ff_deliver_signal when the tree was satisfied)."""
    try:
        ids = json.loads(all_satisfier_signals or "[]")
    except (TypeError, ValueError):
        return []
    return [x for x in ids if isinstance(x, str) and x] if isinstance(ids, list) else []


def suspension_waitpoint_ids(susp: dict[str, str]) -> list[str]:
    """Every waitpoint of a suspension record: the primary, then additional_waitpoints_json's."""
    ids = [susp["waitpoint_id"]] if susp.get("waitpoint_id") else []
    try:
        extras = json.loads(susp.get("additional_waitpoints_json") or "[]")
    except ValueError:
        extras = []
    if isinstance(extras, list):
        ids += [str(x.get("waitpoint_id")) for x in extras if isinstance(x, dict) and x.get("waitpoint_id")]
    return ids


def matcher_names(condition: dict[str, str]) -> list[str]:
    """Matcher names in order ("" = wildcard) from a condition hash."""
    n = _int(condition.get("total_matchers", "")) or 0
    return [condition.get(f"matcher:{i}:name", "") for i in range(n)]


class Signals:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    # ------------------------------------------------------------ signals
    def deliver(self, execution_id: str, waitpoint_id: str, signal: Signal, token: str, *,
                buffer_if_pending: bool = True, signal_id: str | None = None) -> SignalOutcome:
        """Deliver one signal. A waitpoint that is still pending gets the signal buffered (evaluated when
        the worker suspends on it) unless `buffer_if_pending` is False. Token failures raise before any
        execution state is revealed (`InvalidToken`, `TokenExpired`, `MissingToken`...). `signal_id` is
        the caller's id (the REST API's); minted when omitted."""
        k = ExecKeys(execution_id)
        parse_waitpoint_id(waitpoint_id)
        sid = parse_signal_id(signal_id) if signal_id else new_uuid()
        try:  # one round trip: the library finds the lane itself (and wakes the lane's idle workers)
            reply = self.backend.call(self._deliver_call(k, waitpoint_id, sid, signal, token))
        except ERRORS["waitpoint_pending_use_buffer_script"]:
            if not buffer_if_pending:
                raise
            return self.buffer(execution_id, waitpoint_id, signal, token, signal_id=sid)
        events.publish(self.backend, ids=[k.eid])  # a hint for live pages (buffered)
        return _outcome(reply)

    def _deliver_call(self, k: ExecKeys, waitpoint_id: str, sid: str, signal: Signal, token: str) -> F.Call:
        if self.backend.upstream is not None:  # upstream has no fast path: the contract's call, lane read first
            return F.deliver_signal(k, lane=core_refs(self.backend, k).lane, waitpoint_id=waitpoint_id,
                                    signal_id=sid, signal=signal, token=token)
        return F.deliver_signal_fast(k, waitpoint_id=waitpoint_id, signal_id=sid, signal=signal, token=token)

    def buffer(self, execution_id: str, waitpoint_id: str, signal: Signal, token: str, *,
               signal_id: str | None = None) -> SignalOutcome:
        """Store a signal on a pending waitpoint; the suspend that activates it evaluates it."""
        parse_waitpoint_id(waitpoint_id)
        sid = parse_signal_id(signal_id) if signal_id else new_uuid()
        reply = self.backend.call(F.buffer_signal_for_pending_waitpoint(
            ExecKeys(execution_id), waitpoint_id=waitpoint_id, signal_id=sid, signal=signal, token=token))
        return _outcome(reply)

    def deliver_with_stored_token(self, execution_id: str, waitpoint_id: str, signal: Signal) -> SignalOutcome:
        """Deliver using the token stored on the waitpoint: for trusted server-side callers only."""
        eid = ExecutionId(execution_id)
        wp = read_waitpoint(self.backend, eid, waitpoint_id)
        if not wp:
            raise ERRORS["waitpoint_not_found"]("waitpoint_not_found", [], "deliver_with_stored_token")
        return self.deliver(eid, waitpoint_id, signal, wp["waitpoint_token"])

    def deliver_approval(self, execution_id: str, *, lane_id: str, waitpoint_id: str, signal_name: str,
                         idempotency_suffix: str, signal_dedup_ttl_ms: int = 86_400_000,
                         maxlen: int | None = None, max_signals_per_execution: int | None = None,
                         source_identity: str = "", payload: bytes = b"",
                         signal_id: str | None = None) -> SignalOutcome:
        """deliver_approval_signal (operations §6.8): an operator's approval without handling the token
        (the stored one is used). `lane_id` must be the execution's lane (else invalid_input
        lane_mismatch); the signal's idempotency key is `approval:<signal_name>:<idempotency_suffix>`, so a
        repeat answers `duplicate` with the first signal's id. Category `approval`, source `operator`,
        scope `execution`. Bad arguments raise InvalidInput naming the field, before anything is written."""
        eid = ExecutionId(execution_id)
        for field_name, value in (("lane_id", lane_id), ("signal_name", signal_name),
                                  ("idempotency_suffix", idempotency_suffix)):
            if not isinstance(value, str) or not value or len(value) > 256:
                raise InvalidInput("invalid_input", [f"{field_name}: a non-empty string of at most 256 characters"])
        for field_name, num, low in (("signal_dedup_ttl_ms", signal_dedup_ttl_ms, 1), ("maxlen", maxlen, 1),
                                     ("max_signals_per_execution", max_signals_per_execution, 0)):
            if num is not None and (isinstance(num, bool) or not isinstance(num, int) or num < low):
                raise InvalidInput("invalid_input", [f"{field_name}: a whole number >= {low}"])
        parse_waitpoint_id(waitpoint_id)
        lanes = self.backend.client.hmget(ExecKeys(eid).core, ["lane_id", "current_lane", "execution_id"])
        stored_lane, current_lane, exists = map(text, lanes)
        if not exists:
            raise ExecutionNotFound("execution_not_found", [], "deliver_approval_signal")
        lane = stored_lane or current_lane or "default"
        if lane != lane_id:
            raise InvalidInput("invalid_input", [f"lane_mismatch: lane_id {lane_id!r} is not the execution's lane"])
        sig = Signal(signal_name, category="approval", source_type="operator", source_identity=source_identity,
                     payload=payload, idempotency_key=f"approval:{signal_name}:{idempotency_suffix}",
                     target_scope="execution", dedup_ttl_ms=signal_dedup_ttl_ms,
                     signal_maxlen=1000 if maxlen is None else maxlen,
                     max_signals_per_execution=10_000 if max_signals_per_execution is None
                     else max_signals_per_execution)
        wp = read_waitpoint(self.backend, eid, waitpoint_id)
        if not wp:
            raise ERRORS["waitpoint_not_found"]("waitpoint_not_found", [], "deliver_approval_signal")
        # A repeat after the first approval resumed the execution would meet the library's state checks
        # (target_not_signalable) before its dedup check: answer it from the dedup record first.
        first = text(self.backend.client.get(ExecKeys(eid).idx.signal_dedup(waitpoint_id, sig.idempotency_key)))
        if first:
            return SignalOutcome(first, "duplicate", True)
        return self.deliver(eid, waitpoint_id, sig, wp["waitpoint_token"], signal_id=signal_id)

    # ------------------------------------------------------------ operator writes
    def resume(self, execution_id: str, *, trigger_type: str = "operator", resume_delay_ms: int = 0) -> str:
        """Resume a suspended execution without a signal; returns its public state (waiting/delayed)."""
        k = ExecKeys(execution_id)
        refs = core_refs(self.backend, k)
        if not refs.waitpoint_id:  # fall back to the suspension record's pointer
            wp = text(self.backend.client.hget(k.suspension_current, "waitpoint_id"))
            refs = F.CoreRefs(refs.lane, refs.attempt_index, refs.worker_instance_id, wp)
        reply = self.backend.call(F.resume_execution(k, refs, trigger_type=trigger_type,
                                                     resume_delay_ms=resume_delay_ms))
        # ff_resume_execution closes the primary waitpoint; a composite's others are closed here.
        extras = text(self.backend.client.hget(k.suspension_current, "additional_waitpoints_json"))
        for w in suspension_waitpoint_ids({"additional_waitpoints_json": extras}):
            self.backend.call(F.close_waitpoint(k.idx, w, execution=k, reason="resumed"))
        events.publish(self.backend, ids=[k.eid])
        if reply[0] == "waiting":  # eligible now: the lane's idle workers claim it at once
            wake.announce(self.backend, {refs.lane: [k.eid.partition_index]})
        return reply[0]

    def close_waitpoint(self, execution_id: str, waitpoint_id: str, *, reason: str = "proactive_close") -> str:
        """Close an open waitpoint of this execution; returns "closed" or "already_closed"."""
        eid = ExecutionId(execution_id)
        if not read_waitpoint(self.backend, eid, waitpoint_id):
            raise ERRORS["waitpoint_not_found"]("waitpoint_not_found", [], "ff_close_waitpoint")
        k = ExecKeys(eid)
        reply = self.backend.call(F.close_waitpoint(k.idx, waitpoint_id, execution=k, reason=reason))
        events.publish(self.backend, ids=[k.eid])  # the inbox and the execution page re-render
        return reply.fields[0] if reply.fields else "closed"

    # ------------------------------------------------------------ reads
    def pending_waitpoints(self, execution_id: str) -> list[PendingWaitpoint]:
        """Open (pending/active) waitpoints of one execution, sorted by id, with their tokens."""
        k = ExecKeys(execution_id)
        if not self.backend.client.exists(k.core):
            raise ExecutionNotFound("execution_not_found", [], "pending_waitpoints")
        ids = sorted({text(w) for w in self.backend.client.sscan_iter(k.waitpoints, count=100)})
        ids = [w for w in ids if _is_uuid(w)]
        ix = k.idx
        pipe = self.backend.client.pipeline(transaction=False)
        for w in ids:
            pipe.hmget(ix.waitpoint(w), WP_FIELDS)
            pipe.hget(ix.waitpoint_condition(w), "total_matchers")
        raw = pipe.execute() if ids else []
        cur_sid, tree_json = map(text, self.backend.client.hmget(k.core, ["current_suspension_id"])
                                 + [self.backend.client.hget(k.suspension_current, "composite_tree_json")])
        leaf_names = _leaf_names(tree_json) if tree_json else {}
        kept: list[tuple[dict[str, str], int]] = []
        for i in range(len(ids)):
            wp = dict(zip(WP_FIELDS, map(text, raw[2 * i]), strict=True))
            # An active waitpoint of a suspension that has ended (a composite's other waitpoints after a
            # timeout or cancel) is not open any more.
            if wp["state"] == "active" and wp["suspension_id"] != cur_sid:
                continue
            if wp["state"] in ("pending", "active") and wp["waitpoint_token"]:
                kept.append((wp, _int(text(raw[2 * i + 1])) or 0))
        pipe = self.backend.client.pipeline(transaction=False)
        for wp, n in kept:
            if n:
                pipe.hmget(ix.waitpoint_condition(wp["waitpoint_id"]), [f"matcher:{j}:name" for j in range(n)])
        names = iter(pipe.execute() if any(n for _, n in kept) else [])
        out = []
        for wp, n in kept:
            required = [text(x) for x in next(names)] if n else leaf_names.get(wp["waitpoint_key"], [])
            out.append(PendingWaitpoint(
                wp["waitpoint_id"], wp["waitpoint_key"], wp["state"], wp["waitpoint_token"], wp["execution_id"],
                [x for x in required if x], _int(wp["created_at"]) or 0, _int(wp["activated_at"]),
                _int(wp["expires_at"])))
        return out

    # ------------------------------------------------------------ secrets
    def rotate_secret(self, new_kid: str, new_secret_hex: str,
                      grace_ms: int | None = None) -> hmac_secrets.RotationReport:
        return hmac_secrets.rotate(self.backend, new_kid, new_secret_hex, grace_ms)

    def hmac_kids(self) -> hmac_secrets.KidInfo:
        return hmac_secrets.list_kids(self.backend)


def _leaf_names(tree_json: str) -> dict[str, list[str]]:
    """waitpoint key -> the signal names its nodes wait for ([] = any), from a composite tree."""
    out: dict[str, list[str]] = {}
    try:
        tree = json.loads(tree_json)
    except ValueError:
        return out

    def named(node: dict[str, Any]) -> list[str]:
        names = node.get("names")
        if isinstance(names, list):
            return [str(x) for x in names if x]
        m = node.get("matcher")
        return [str(m["name"])] if isinstance(m, dict) and m.get("kind") == "ByName" and m.get("name") else []

    def walk(node: Any) -> None:
        if not isinstance(node, dict):
            return
        if node.get("kind") == "Single" and node.get("waitpoint_key"):
            out.setdefault(str(node["waitpoint_key"]), []).extend(named(node))
        elif node.get("kind") == "Count" and not node.get("members"):
            for w in node.get("waitpoints") or []:
                out.setdefault(str(w), []).extend(named(node))
        for m in node.get("members") or []:
            walk(m)

    walk(tree)
    return out


def _outcome(reply: F.Reply) -> SignalOutcome:
    if reply.status == "DUPLICATE":
        return SignalOutcome(reply[0], "duplicate", True)
    return SignalOutcome(reply[0], reply[1])


def _is_uuid(value: str) -> bool:
    try:
        parse_waitpoint_id(value)
    except ValueError:
        return False
    return True
