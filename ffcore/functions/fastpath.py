"""FCALL builders of our fast-path functions (lua/fastpath.lua; not in the v0.2.0 contract).

`create_fast` is ff_create_execution with the new core hash copied from a template (same keys, args, writes
and reply). `claim_next` picks and claims up to N eligible executions of one lane of one partition in one
call; `complete_batch_and_claim` completes tasks of one lane and partition (each as ff_complete_execution) and
then claims their successors like `claim_next` (a worker driver's per-turn write). (The library's single-task
ff_complete_and_claim_next stays for callers of the library; ffcore no longer calls it.) They reply `claims`:
what was claimed and the eids left for the contract path.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from ..errors import ScriptError, script_error
from ..keys import ExecKeys, PartitionKeys
from .base import Arg, Call, Reply, _s, fn, parse_status
from .lifecycle import Fence, complete_execution, create_execution
from .suspension import Signal, _signal_args, _signal_keys

#: Most claims one fast-path call may make (the library's bound).
MAX_CLAIMS = 64


@dataclass(frozen=True)
class Claimed:
    """One execution claimed by a fast-path call: what `ClaimedTask` needs, no further read."""

    execution_id: str
    lease_id: str
    lease_epoch: int
    lease_expires_at: int
    attempt_id: str
    attempt_index: int
    attempt_type: str
    kind: str
    payload: bytes
    policy_json: str
    tags: dict[str, str]


@dataclass(frozen=True)
class Claims:
    claimed: list[Claimed]
    #: Eligible eids the fast path left alone (admission attachments, capability mismatch): contract path.
    slow: list[str]
    #: complete_batch_and_claim only: per completion, None (completed) or the typed error it got.
    outcomes: list[ScriptError | None] | None = None


def _claimed(raw: Sequence[Any]) -> Claimed:
    # Per claimed task on the worker's hot path: the text fields decoded in one pass.
    eid, lease_id, attempt_id, attempt_type, kind, policy_json = map(_s, itemgetter(0, 1, 4, 6, 7, 9)(raw))
    flat = raw[10]
    tags = {_s(flat[i]): _s(flat[i + 1]) for i in range(0, len(flat) - 1, 2)} if flat else {}
    payload = raw[8]
    return Claimed(eid, lease_id, int(raw[2]), int(raw[3]), attempt_id, int(raw[5]), attempt_type, kind,
                   payload if isinstance(payload, bytes) else _s(payload).encode(), policy_json, tags)


def parse_claims(function: str, raw: Any) -> Reply:
    """`{1, "OK", [status,] claimed, slow}` -> Reply whose `raw[0]` is a `Claims`."""
    if not isinstance(raw, list) or len(raw) < 2 or raw[0] != 1:
        parse_status(function, raw)  # raises the typed error of {0, code, ...} (or unexpected_reply)
        raise ScriptError("unexpected_reply", [repr(raw)[:200]], function)
    rest = raw[2:]
    status = "OK"
    outcomes: list[ScriptError | None] | None = None
    if function == "ff_complete_batch_and_claim" and len(rest) == 3 and isinstance(rest[0], list):
        outcomes = [_outcome(function, o) for o in rest[0]]
        rest = rest[1:]
    elif rest and not isinstance(rest[0], list):
        status, rest = _s(rest[0]), rest[1:]
    if len(rest) != 2:
        raise ScriptError("unexpected_reply", [repr(raw)[:200]], function)
    claims = Claims([_claimed(c) for c in rest[0]], [_s(e) for e in rest[1]], outcomes)
    return Reply(_s(raw[1]), [status], [claims])


def _outcome(function: str, raw: Any) -> ScriptError | None:
    """One completion of a batch: "completed" -> None, an error reply -> its typed error."""
    if isinstance(raw, list) and raw and raw[0] == 0:
        return script_error(_s(raw[1]), [_s(x) for x in raw[2:]], function)
    if _s(raw) == "completed":
        return None
    raise ScriptError("unexpected_reply", [repr(raw)[:200]], function)


@functools.lru_cache(maxsize=4096)
def _claim_key_tuple(n: int, lane: str, worker_instance_id: str) -> tuple[str, ...]:
    return tuple(_claim_keys_uncached(n, lane, worker_instance_id))


def _claim_keys(n: int, lane: str, worker_instance_id: str) -> list[str]:
    """The claim's index keys of one lane and partition: the same for every call of a worker (cached)."""
    return list(_claim_key_tuple(n, lane, worker_instance_id))


def _claim_keys_uncached(n: int, lane: str, worker_instance_id: str) -> list[str]:
    ix = PartitionKeys(n)
    lk = ix.lane(lane)
    return [lk.eligible, ix.lease_expiry, ix.worker_leases(worker_instance_id), lk.active, ix.attempt_timeout,
            ix.execution_deadline]


def _claim_args(worker_id: str, worker_instance_id: str, lane: str, capabilities_csv: str, lease_ttl_ms: int,
                ids: Sequence[tuple[str, str]], idle: int = 0) -> list[Arg]:
    args: list[Arg] = [worker_id, worker_instance_id, lane, capabilities_csv, lease_ttl_ms, lease_ttl_ms * 2 // 3,
                       len(ids)]
    for lease_id, attempt_id in ids:
        args += [lease_id, attempt_id]
    # `idle` (its handler slots): the worker listens on keys.worker_wake, so a claim that leaves it a free slot
    # lists it as idle, and it takes hand-offs ("2"): its member carries these lease parameters — idle_member.
    if idle:
        args += ["2", idle]
    return args


def idle_member(worker_id: str, worker_instance_id: str, lease_ttl_ms: int, slots: int) -> str:
    """A hand-off taking worker's member of the lane's idle set, as its claims (`_claim_args`) list it."""
    return f"{worker_instance_id}\t{lease_ttl_ms}\t{lease_ttl_ms * 2 // 3}\t{slots}\t{worker_id}"


#: First byte of a hand-off on a worker's own wake channel (lua/fastpath.lua hand_off); a plain wake is text.
HANDOFF = b"\x01"


def parse_handoff(data: bytes) -> tuple[str, int, Claimed]:
    """A hand-off message: the lane, the partition and the task claimed for this worker — "\\x01", then
    length-prefixed fields ("<bytes>:<value>"): lane, partition, the claim reply's row (its tags as a count
    and the flat pairs). ValueError when malformed."""
    fields: list[bytes] = []
    at = len(HANDOFF)
    while at < len(data):
        colon = data.index(b":", at)
        size = int(data[at:colon])
        fields.append(data[colon + 1:colon + 1 + size])
        at = colon + 1 + size
    if at != len(data) or len(fields) < 13 or len(fields) != 13 + int(fields[12]):
        raise ValueError("malformed hand-off message")
    row: list[Any] = fields[2:12]
    row.append(fields[13:])
    return fields[0].decode(), int(fields[1]), _claimed(row)


@fn("ff_create_fast")
def create_fast(k: ExecKeys, **kw: Any) -> Call:
    """`create_execution`'s call (same keyword arguments) for ff_create_fast."""
    return as_fast_create(create_execution(k, **kw))


def as_fast_create(call: Call, *, created_index: str | None = None, wake: bool = False, offer: bool = False,
                   handoff: tuple[str, str] | None = None, more_indexes: Sequence[str] = ()) -> Call:
    """A built ff_create_execution call sent to ff_create_fast instead (same KEYS, ARGV and reply). With
    `created_index` (the partition's I:created), a create that happens also lists itself there (server
    clock) and, with `wake`, announces itself to the lane's idle workers — in the same call; with `handoff`
    (a fresh lease_id, attempt_id), an idle worker that takes hand-offs is handed the lane's head instead.
    `offer` (work needing capabilities, not the batch's waking create): only a worker idle on its capability
    list's idle set is woken or handed it; nobody else is told. `more_indexes` (with `created_index`): our
    per-kind / per-tag listing indexes, scored like I:created."""
    if created_index is None:
        return Call("ff_create_fast", call.keys, call.args, call.parse, call.readonly)
    mode = "1" if wake else "2" if offer else "0"
    extra = [mode, *(handoff if mode != "0" and handoff else ())]
    return Call("ff_create_fast", [*call.keys, created_index, *more_indexes], [*call.args, *extra], call.parse,
                call.readonly)


@fn("ff_deliver_signal_fast")
def deliver_signal_fast(k: ExecKeys, *, waitpoint_id: str, signal_id: str, signal: Signal, token: str) -> Call:
    """`deliver_signal` without the lane: the library finds it on E:core, so no lane read comes first (and
    a signal that makes the execution eligible wakes the lane's idle workers). Same reply."""
    keys = _signal_keys(k, waitpoint_id, signal_id, signal) + [k.suspension_current, k.idx.suspension_timeout,
                                                               k.idx.hmac_secrets, k.idx.signal_delivery]
    return Call("ff_deliver_signal_fast", keys, _signal_args(k, waitpoint_id, signal_id, signal, token))


@fn("ff_claim_next")
def claim_next(
    partition: int, *, lane: str, worker_id: str, worker_instance_id: str, capabilities_csv: str,
    lease_ttl_ms: int, ids: Sequence[tuple[str, str]], idle: int = 0,
) -> Call:
    """Claim up to len(ids) eligible executions of `lane` on `partition`; `ids` = (lease_id, attempt_id) each.
    `idle`: the worker listens on its own wake channel (see `_claim_args`)."""
    return Call("ff_claim_next", _claim_keys(partition, lane, worker_instance_id),
                _claim_args(worker_id, worker_instance_id, lane, capabilities_csv, lease_ttl_ms, ids, idle),
                parse_claims)


@fn("ff_claim_capable")
def claim_capable(
    partition: int, *, lane: str, caps_csv: str, worker_id: str, worker_instance_id: str, capabilities_csv: str,
    lease_ttl_ms: int, ids: Sequence[tuple[str, str]], idle: int = 0,
) -> Call:
    """`claim_next` drawing its candidates from the lane's capability index for `caps_csv`."""
    index = PartitionKeys(partition).lane(lane).capable(caps_csv)
    return Call("ff_claim_capable", [*_claim_keys(partition, lane, worker_instance_id), index],
                _claim_args(worker_id, worker_instance_id, lane, capabilities_csv, lease_ttl_ms, ids, idle),
                parse_claims)


#: Most completions one ff_complete_batch_and_claim may carry (the library's bound).
MAX_BATCH = 64


@fn("ff_complete_batch_and_claim")
def complete_batch_and_claim(
    done: Sequence[tuple[ExecKeys, Fence, bytes]], *, worker_id: str, capabilities_csv: str, lease_ttl_ms: int,
    ids: Sequence[tuple[str, str]], caps_csv: str = "", wants: Sequence[bool] | None = None, idle: int = 0,
) -> Call:
    """Complete several fenced attempts of ONE lane, partition and worker instance (each as its own
    ff_complete_execution), then claim one successor of that lane and partition per completion that
    `wants` one (default: the first len(ids)) and completed — from the capability index of `caps_csv`
    when given. The reply's `Claims.outcomes` says how each completion went; successors come in the
    order of the completions that got one."""
    if not 1 <= len(done) <= MAX_BATCH:
        raise ValueError(f"a batch completes 1..{MAX_BATCH} tasks")
    want = list(wants) if wants is not None else [j < len(ids) for j in range(len(done))]
    if len(want) != len(done) or sum(want) != len(ids):
        raise ValueError("one wants flag per completion and one id pair per wanted successor")
    first_keys, first = done[0][0], done[0][1]
    n, lane, wiid = first_keys.eid.partition_index, first.lane, first.worker_instance_id
    keys = _claim_keys(n, lane, wiid)
    if caps_csv:
        keys.append(PartitionKeys(n).lane(lane).capable(caps_csv))
    args: list[Arg] = [len(done), "1" if caps_csv else "0", "".join("1" if w else "0" for w in want)]
    for k, f, result in done:
        if (k.eid.partition_index, f.lane, f.worker_instance_id) != (n, lane, wiid):
            raise ValueError("a batch holds tasks of one partition, lane and worker instance")
        call = complete_execution(k, f, result)
        keys += call.keys
        args += call.args
    return Call("ff_complete_batch_and_claim", keys,
                args + _claim_args(worker_id, wiid, lane, capabilities_csv, lease_ttl_ms, ids, idle), parse_claims)
