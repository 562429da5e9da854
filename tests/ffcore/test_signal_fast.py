"""ff_deliver_signal_fast (lua/fastpath.lua): a signal in one round trip.

Covered: for twin executions suspended alike, the fast function gives the reply and leaves the keys that
the contract's ff_deliver_signal leaves (given the lane the caller read first) — resumed at once, resumed
after a delay, appended, no-op, duplicate, refused token, terminal target; it finds a lane other than
"default" on E:core; a signal that makes the execution eligible at once announces its partition on the
lane's wake channel (a delayed resume does not), and so do an operator resume and a suspension timeout's
auto-resume; `Signals.deliver` sends one FCALL and nothing else; a running worker with a long poll interval
picks the resumed execution up at once.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest

from ffcore import functions as F
from ffcore import wake
from ffcore.engine.suspension_scanners import SuspensionTimeoutScanner
from ffcore.errors import ScriptError
from ffcore.execution.client import Client
from ffcore.functions import Signal
from ffcore.ids import ExecutionId
from ffcore.keys import ExecKeys
from ffcore.reads import text
from ffcore.suspension.signals import Signals
from ffcore.worker.worker import Registry, Worker, WorkerConfig
from tests.keyspace import MISSING_EID

from .invariants import check, claim, create
from .test_fastpath import _norm, snapshot
from .test_wake import listening, next_message

LANE2 = "sig-lane"


def _suspended(backend, tag: str, names: list[str], mode: str = "any", lane: str = "default"):
    """A claimed then suspended execution with fixed ids (suffixed by `tag`); (eid, waitpoint id, token)."""
    eid = create(backend, lane=lane, payload=b"p")
    f = claim(backend, eid, lane=lane, lease_id=f"LID-{tag}", attempt_id=f"AID-{tag}")
    cond = json.dumps({"condition_type": "signal_set", "required_signal_names": names, "signal_match_mode": mode,
                       "minimum_signal_count": 1})
    wid = f"00000000-0000-4000-8000-00000000000{tag[-1]}"
    out = backend.call(F.suspend_execution(ExecKeys(eid), f, suspension_id=f"SUS-{tag}", waitpoint_id=wid,
                                           waitpoint_key=f"wpk-{tag}", condition_json=cond, policy_json="{}"))
    return eid, wid, out[3]


def _subs(tag: str, wid: str, token: str, *sids: str) -> dict[str, str]:
    subs = {wid: "WID", token.split(":", 1)[1]: "DIGEST", f"LID-{tag}": "LID", f"AID-{tag}": "AID",
            f"SUS-{tag}": "SUS", f"wpk-{tag}": "WPK"}
    subs.update({s: f"SID{i}" for i, s in enumerate(sids)})
    return subs


def _view(backend, eid: str, wid: str, sids: list[str], subs: dict[str, str]) -> dict[str, Any]:
    """snapshot() of the execution plus its waitpoint's and signals' keys, normalized alike."""
    view = snapshot(backend, eid, subs)
    subs = {eid: "EID", **subs}
    for name in ("waitpoint", "waitpoint_condition", "waitpoint_signals"):
        view[name] = _dump(backend, getattr(ExecKeys(eid).idx, name)(wid), subs)
    for i, sid in enumerate(sids):
        view[f"signal{i}"] = _dump(backend, ExecKeys(eid).idx.signal(sid), subs)
        view[f"payload{i}"] = _dump(backend, ExecKeys(eid).idx.signal_payload(sid), subs)
    return view


def _dump(backend, key: str, subs: dict[str, str]) -> Any:
    c = backend.client
    kind = text(c.type(key))
    if kind == "hash":
        return {_norm(f, subs): _norm(v, subs) for f, v in c.hgetall(key).items()}
    if kind == "stream":
        return [{_norm(f, subs): _norm(v, subs) for f, v in fields.items()} for _id, fields in c.xrange(key)]
    if kind == "string":
        return _norm(c.get(key), subs)
    return kind


def _contract(backend, eid: str, wid: str, sid: str, sig: Signal, token: str) -> Any:
    lane = text(backend.client.hget(ExecKeys(eid).core, "lane_id")) or "default"
    return _send(backend, F.deliver_signal(ExecKeys(eid), lane=lane, waitpoint_id=wid, signal_id=sid, signal=sig,
                                           token=token))


def _fast(backend, eid: str, wid: str, sid: str, sig: Signal, token: str) -> Any:
    return _send(backend, F.deliver_signal_fast(ExecKeys(eid), waitpoint_id=wid, signal_id=sid, signal=sig,
                                                token=token))


def _send(backend, call: F.Call) -> Any:
    try:
        r = backend.call(call)
        return (r.status, r.fields)
    except ScriptError as e:
        return ("error", e.code)


def _ids(reply: Any, sids: list[str]) -> str:
    out = json.dumps(reply)
    for i, sid in enumerate(sids):
        out = out.replace(sid, f"SID{i}")
    return out


SIGNALS = {
    # name: (condition names, mode, signals sent as (name, kwargs))
    "resume": (["approved"], "any", [("approved", {"payload": b'{"by":"ann"}'})]),
    "resume-delayed": (["approved"], "any", [("approved", {"resume_delay_ms": 60_000})]),
    "appended-then-resume": (["a", "b"], "all", [("a", {}), ("b", {})]),
    "no-op": (["approved"], "any", [("other", {})]),
    "duplicate": (["a", "b"], "all", [("a", {"idempotency_key": "k1"}), ("a", {"idempotency_key": "k1"})]),
}


@pytest.mark.parametrize("lane", ["default", LANE2])
@pytest.mark.parametrize("case", sorted(SIGNALS))
def test_the_fast_delivery_replies_and_writes_as_the_contract_one(hb, case, lane):
    names, mode, sent = SIGNALS[case]
    a, wa, ta = _suspended(hb, "A1", names, mode, lane)
    b, wb, tb = _suspended(hb, "B2", names, mode, lane)
    sa = [f"00000000-0000-4000-8000-0000000a000{i}" for i in range(len(sent))]
    sb = [f"00000000-0000-4000-8000-0000000b000{i}" for i in range(len(sent))]
    for i, (name, kw) in enumerate(sent):
        got_a = _contract(hb, a, wa, sa[i], Signal(name, **kw), ta)
        got_b = _fast(hb, b, wb, sb[i], Signal(name, **kw), tb)
        assert got_a[0] != "error" and _ids(got_b, sb) == _ids(got_a, sa), (case, i, got_a, got_b)
    assert _view(hb, b, wb, sb, _subs("B2", wb, tb, *sb)) == _view(hb, a, wa, sa, _subs("A1", wa, ta, *sa))
    if case.startswith("resume") or case.endswith("resume"):
        state = check(hb, b)["public_state"]
        assert state == ("delayed" if case == "resume-delayed" else "waiting")
        lk = ExecKeys(b).lane(lane)
        key = lk.delayed if case == "resume-delayed" else lk.eligible
        assert hb.client.zscore(key, b) is not None and hb.client.zscore(lk.suspended, b) is None


def test_refusals_are_the_contract_ones_and_stamp_alike(hb):
    a, wa, ta = _suspended(hb, "A1", ["approved"])
    b, wb, tb = _suspended(hb, "B2", ["approved"])
    bad_a, bad_b = ta[:-1] + ("0" if ta[-1] != "0" else "1"), tb[:-1] + ("0" if tb[-1] != "0" else "1")
    sid_a, sid_b = "00000000-0000-4000-8000-0000000a0000", "00000000-0000-4000-8000-0000000b0000"
    assert _fast(hb, b, wb, sid_b, Signal("approved"), bad_b) == _contract(hb, a, wa, sid_a, Signal("approved"),
                                                                            bad_a) == ("error", "invalid_token")
    assert _view(hb, b, wb, [sid_b], _subs("B2", wb, tb, sid_b)) == _view(hb, a, wa, [sid_a],
                                                                          _subs("A1", wa, ta, sid_a))
    assert check(hb, b)["last_hmac_validation_failed_at"]
    # A terminal target: cancelled, then signalled with its (valid) token.
    for eid in (a, b):
        Client(hb).cancel(eid, reason="test")
    assert _fast(hb, b, wb, sid_b, Signal("approved"), tb) == _contract(hb, a, wa, sid_a, Signal("approved"),
                                                                         ta) == ("error", "target_not_signalable")
    assert _fast(hb, ExecutionId(MISSING_EID), wa, sid_b, Signal("approved"), ta) == ("error", "execution_not_found")


def test_a_signal_that_resumes_at_once_wakes_the_lane_and_a_delayed_one_does_not(hb):
    eid, wid, token = _suspended(hb, "A1", ["approved"], lane=LANE2)
    later, wid2, token2 = _suspended(hb, "B2", ["approved"], lane=LANE2)
    with listening(hb, LANE2) as ps:
        Signals(hb).deliver(later, wid2, Signal("approved", resume_delay_ms=60_000), token2)
        assert ps.get_message(timeout=0.3) is None
        Signals(hb).deliver(eid, wid, Signal("nothing-we-wait-for"), token)  # no_op: nothing to wake
        assert ps.get_message(timeout=0.3) is None
        assert Signals(hb).deliver(eid, wid, Signal("approved"), token).resumed
        m = next_message(ps)
    assert wake.parse(m["data"]) == [ExecutionId(eid).partition_index]


def test_signals_deliver_is_one_round_trip(hb, monkeypatch):
    eid, wid, token = _suspended(hb, "A1", ["approved"])
    sent: list[str] = []
    real_call, real_exec = hb.call, type(hb.client).execute_command
    me = threading.current_thread()

    def spy_call(call, *a, **kw):
        sent.append(call.function)
        return real_call(call, *a, **kw)

    def spy_exec(self, *args, **kw):
        if threading.current_thread() is me:  # not the live-page event flusher's PUBLISH
            sent.append(str(args[0]))
        return real_exec(self, *args, **kw)

    monkeypatch.setattr(hb, "call", spy_call)
    monkeypatch.setattr(type(hb.client), "execute_command", spy_exec)
    assert Signals(hb).deliver(eid, wid, Signal("approved"), token).resumed
    assert sent == ["ff_deliver_signal_fast"], sent
    assert check(hb, eid)["public_state"] == "waiting"


def test_a_running_worker_picks_up_a_resumed_execution_without_waiting_for_its_poll(hb):
    eid, wid, token = _suspended(hb, "A1", ["approved"], lane=LANE2)
    ran: list[tuple[str, int]] = []
    reg = Registry()

    @reg.handler("*")
    def record(task: Any) -> None:
        ran.append((str(task.execution_id), task.attempt_index))

    w = Worker(hb, WorkerConfig(lanes=(LANE2,), concurrency=1, poll_interval_ms=60_000), reg)
    th = threading.Thread(target=w.run, kwargs={"install_signal_handlers": False}, daemon=True)
    th.start()
    try:
        # Idle for 1.5 s, its backoff (doubling from 5 ms) is in a 1.28 s wait that ends ~1 s from now.
        time.sleep(1.5)
        assert ran == []
        assert Signals(hb).deliver(eid, wid, Signal("approved"), token).resumed
        deadline = time.monotonic() + 0.6
        while not ran and time.monotonic() < deadline:
            time.sleep(0.01)
        assert ran == [(eid, 0)]  # the interrupted attempt, claimed again
    finally:
        w.stop()
        th.join(5)
    c = check(hb, eid)
    assert c["public_state"] == "completed" and c["current_attempt_index"] == "0"


def test_an_operator_resume_wakes_the_lane_and_a_delayed_one_does_not(hb):
    eid, _, _ = _suspended(hb, "A1", ["approved"], lane=LANE2)
    later, _, _ = _suspended(hb, "B2", ["approved"], lane=LANE2)
    with listening(hb, LANE2) as ps:
        assert Signals(hb).resume(later, resume_delay_ms=60_000) == "delayed"
        assert ps.get_message(timeout=0.3) is None
        assert Signals(hb).resume(eid) == "waiting"
        m = next_message(ps)
    assert wake.parse(m["data"]) == [ExecutionId(eid).partition_index]


def test_an_auto_resumed_suspension_timeout_wakes_the_lane(hb):
    eid = create(hb, lane=LANE2, payload=b"p")
    (t,) = Worker(hb, WorkerConfig(lanes=(LANE2,), concurrency=1), Registry()).claim_next(1)
    t.suspend("never", timeout_ms=5, timeout_behavior="auto_resume")
    time.sleep(0.01)
    with listening(hb, LANE2) as ps:
        assert SuspensionTimeoutScanner(hb).scan_partition(ExecutionId(eid).partition_index, hb.now_ms()) == 1
        m = next_message(ps)
    assert wake.parse(m["data"]) == [ExecutionId(eid).partition_index]
    assert check(hb, eid)["public_state"] == "waiting"
