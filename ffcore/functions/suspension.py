"""FCALL builders of suspension.lua + signal.lua: suspend, resume, waitpoints, signals, HMAC secrets.

`ff_claim_resumed_execution` (signal.lua) lives with the claims in `lifecycle.py`.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..keys import ExecKeys, PartitionKeys
from .base import Call, fn, opt
from .lifecycle import CoreRefs, Fence

__all__ = ["Signal", "buffer_signal_for_pending_waitpoint", "close_waitpoint", "create_pending_waitpoint",
           "deliver_signal", "expire_suspension", "list_waitpoint_hmac_kids",
           "resume_execution", "rotate_waitpoint_hmac_secret", "suspend_execution", "suspend_typed"]

#: Score of a suspension without a timeout in `L:suspended` (contract §3.2).
NO_TIMEOUT_SCORE = 9_999_999_999_999


# ---------------------------------------------------------------- suspension.lua
@fn("ff_suspend_execution")
def suspend_execution(
    k: ExecKeys, f: Fence, *, suspension_id: str, waitpoint_id: str, waitpoint_key: str, condition_json: str,
    policy_json: str, reason_code: str = "waiting_for_signal", requested_by: str = "worker",
    timeout_at: int | None = None, timeout_behavior: str = "fail", use_pending: bool = False,
    continuation: str = "", history_maxlen: int = 1000,
) -> Call:
    """`waitpoint_id` names KEYS 8/9/15: a fresh id, or the pending waitpoint to activate (`use_pending`)."""
    lk, ix = k.lane(f.lane), k.idx
    return Call("ff_suspend_execution", [
        k.core, k.attempt(f.attempt_index), k.lease_current, k.lease_history, ix.lease_expiry,
        ix.worker_leases(f.worker_instance_id), k.suspension_current, ix.waitpoint(waitpoint_id),
        ix.waitpoint_signals(waitpoint_id), ix.suspension_timeout, ix.pending_waitpoint_expiry, lk.active,
        lk.suspended, k.waitpoints, ix.waitpoint_condition(waitpoint_id), ix.attempt_timeout, ix.hmac_secrets,
    ], [
        k.eid, f.attempt_index, f.attempt_id, f.lease_id, f.lease_epoch, suspension_id, waitpoint_id,
        waitpoint_key, reason_code, requested_by, opt(timeout_at), condition_json, policy_json, continuation,
        "1" if use_pending else "", timeout_behavior, history_maxlen,
    ])


@fn("ff_suspend_typed")
def suspend_typed(
    k: ExecKeys, f: Fence, *, suspension_id: str, waitpoints: list[tuple[str, str]], condition_json: str,
    policy_json: str, reason_code: str = "waiting_for_signal", requested_by: str = "worker",
    timeout_at: int | None = None, timeout_behavior: str = "fail", continuation: str = "",
    idempotency_key: str = "", dedup_ttl_ms: int = 0, history_maxlen: int = 1000,
) -> Call:
    """Ours (lua/suspension.lua): ff_suspend_execution's 17 KEYS/ARGV, then the dedup key, idempotency key,
    dedup TTL and the extra waitpoints; `waitpoints` = [(id, key)], [0] the primary."""
    lk, ix = k.lane(f.lane), k.idx
    (wid, wkey), extras = waitpoints[0], waitpoints[1:]
    keys = [
        k.core, k.attempt(f.attempt_index), k.lease_current, k.lease_history, ix.lease_expiry,
        ix.worker_leases(f.worker_instance_id), k.suspension_current, ix.waitpoint(wid), ix.waitpoint_signals(wid),
        ix.suspension_timeout, ix.pending_waitpoint_expiry, lk.active, lk.suspended, k.waitpoints,
        ix.waitpoint_condition(wid), ix.attempt_timeout, ix.hmac_secrets,
        k.suspend_dedup(idempotency_key) if idempotency_key else ix.noop,
    ]
    args: list[str | bytes | int] = [
        k.eid, f.attempt_index, f.attempt_id, f.lease_id, f.lease_epoch, suspension_id, wid, wkey, reason_code,
        requested_by, opt(timeout_at), condition_json, policy_json, continuation, "", timeout_behavior,
        history_maxlen, idempotency_key, dedup_ttl_ms, len(extras),
    ]
    for x, xkey in extras:
        keys += [ix.waitpoint(x), ix.waitpoint_signals(x), ix.waitpoint_condition(x)]
        args += [x, xkey]
    return Call("ff_suspend_typed", keys, args)


@fn("ff_resume_execution")
def resume_execution(k: ExecKeys, r: CoreRefs, *, trigger_type: str = "operator", resume_delay_ms: int = 0) -> Call:
    lk, ix, w = k.lane(r.lane), k.idx, r.waitpoint_id
    wp = ix.waitpoint(w) if w else ix.noop
    return Call("ff_resume_execution", [
        k.core, k.suspension_current, wp, ix.waitpoint_signals(w) if w else ix.noop, ix.suspension_timeout,
        lk.eligible, lk.delayed, lk.suspended,
    ], [k.eid, trigger_type, resume_delay_ms])


@fn("ff_create_pending_waitpoint")
def create_pending_waitpoint(k: ExecKeys, *, attempt_index: int, waitpoint_id: str, waitpoint_key: str,
                             expires_at: int) -> Call:
    ix = k.idx
    return Call("ff_create_pending_waitpoint", [k.core, ix.waitpoint(waitpoint_id), ix.pending_waitpoint_expiry,
                                                ix.hmac_secrets],
                [k.eid, attempt_index, waitpoint_id, waitpoint_key, expires_at])


@fn("ff_expire_suspension")
def expire_suspension(k: ExecKeys, r: CoreRefs) -> Call:
    lk, ix, w = k.lane(r.lane), k.idx, r.waitpoint_id
    return Call("ff_expire_suspension", [
        k.core, k.suspension_current, ix.waitpoint(w) if w else ix.noop,
        ix.waitpoint_condition(w) if w else ix.noop, k.attempt(r.attempt_index), k.stream_meta(r.attempt_index),
        ix.suspension_timeout, lk.suspended, lk.terminal, lk.eligible, lk.delayed, k.lease_history,
    ], [k.eid])


@fn("ff_close_waitpoint")
def close_waitpoint(ix: PartitionKeys, waitpoint_id: str, *, execution: ExecKeys | None = None,
                    reason: str = "proactive_close") -> Call:
    # KEYS 1 (E:core) is unused by the Lua; name the owner when known, the partition's noop key otherwise.
    return Call("ff_close_waitpoint", [execution.core if execution else ix.noop, ix.waitpoint(waitpoint_id),
                                       ix.pending_waitpoint_expiry], [waitpoint_id, reason])


@fn("ff_rotate_waitpoint_hmac_secret")
def rotate_waitpoint_hmac_secret(ix: PartitionKeys, *, new_kid: str, new_secret_hex: str, grace_ms: int) -> Call:
    return Call("ff_rotate_waitpoint_hmac_secret", [ix.hmac_secrets], [new_kid, new_secret_hex, grace_ms])


@fn("ff_list_waitpoint_hmac_kids")
def list_waitpoint_hmac_kids(ix: PartitionKeys) -> Call:
    return Call("ff_list_waitpoint_hmac_kids", [ix.hmac_secrets], [], readonly=True)


# ---------------------------------------------------------------- signal.lua
@dataclass(frozen=True)
class Signal:
    """One signal as the caller describes it (contract §5.26 ARGV 4–17); the token is passed separately."""

    name: str
    category: str = "external"
    source_type: str = "external"
    source_identity: str = ""
    payload: bytes = b""
    payload_encoding: str = "json"
    idempotency_key: str = ""
    correlation_id: str = ""
    target_scope: str = "waitpoint"
    created_at: int | None = None
    dedup_ttl_ms: int = 86_400_000
    resume_delay_ms: int = 0
    signal_maxlen: int = 1000
    max_signals_per_execution: int = 10_000


def _signal_keys(k: ExecKeys, waitpoint_id: str, signal_id: str, s: Signal) -> list[str]:
    ix = k.idx
    idem = ix.signal_dedup(waitpoint_id, s.idempotency_key) if s.idempotency_key else ix.noop
    return [k.core, ix.waitpoint_condition(waitpoint_id), ix.waitpoint_signals(waitpoint_id), k.signals,
            ix.signal(signal_id), ix.signal_payload(signal_id), idem, ix.waitpoint(waitpoint_id)]


def _signal_args(k: ExecKeys, waitpoint_id: str, signal_id: str, s: Signal, token: str) -> list[str | bytes | int]:
    return [signal_id, k.eid, waitpoint_id, s.name, s.category, s.source_type, s.source_identity, s.payload,
            s.payload_encoding, s.idempotency_key, s.correlation_id, s.target_scope, opt(s.created_at),
            s.dedup_ttl_ms, s.resume_delay_ms, s.signal_maxlen, s.max_signals_per_execution, token]


@fn("ff_deliver_signal")
def deliver_signal(k: ExecKeys, *, lane: str, waitpoint_id: str, signal_id: str, signal: Signal, token: str) -> Call:
    lk, ix = k.lane(lane), k.idx
    keys = _signal_keys(k, waitpoint_id, signal_id, signal) + [
        k.suspension_current, lk.eligible, lk.suspended, lk.delayed, ix.suspension_timeout, ix.hmac_secrets,
        ix.signal_delivery]
    return Call("ff_deliver_signal", keys, _signal_args(k, waitpoint_id, signal_id, signal, token))


@fn("ff_buffer_signal_for_pending_waitpoint")
def buffer_signal_for_pending_waitpoint(k: ExecKeys, *, waitpoint_id: str, signal_id: str, signal: Signal,
                                        token: str) -> Call:
    keys = _signal_keys(k, waitpoint_id, signal_id, signal) + [k.idx.hmac_secrets]
    return Call("ff_buffer_signal_for_pending_waitpoint", keys,
                _signal_args(k, waitpoint_id, signal_id, signal, token))
