"""Upstream mode's one switch to upstream's call shapes (ffcore/functions/upstream_v34.py, issue #40 item 3): the
declared v34 shapes are what upstream's released library reads, our calls are adapted to them, and a call
upstream's Lua would misread is refused before it is sent."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from ffcore import functions as F
from ffcore.functions import upstream_v34
from ffcore.functions.upstream_v34 import V34, to_v34
from ffcore.keys import ExecKeys
from ffcore.library import Detected
from ffcore.upstream import NotOnUpstream, UpstreamMode
from tests.upstream_library import upstream_v015_source
from tests.upstream_scenario import *  # noqa: F403 - the deployment's fixtures

EID = "{fp:5}:00000000-0000-4000-8000-000000000001"


def _highest_index_read() -> dict[str, tuple[int, int]]:
    """Per function of upstream's library: the highest KEYS[i] and ARGV[i] its code reads (comments dropped)."""
    code = "\n".join(line.split("--")[0] for line in upstream_v015_source().splitlines())
    parts = re.split(r"redis\.register_function\('(\w+)'", code)
    out = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        ks = [int(x) for x in re.findall(r"keys\[(\d+)\]", body)] or [0]
        args = [int(x) for x in re.findall(r"args\[(\d+)\]", body)] or [0]
        out[name] = (max(ks), max(args))
    return out


def test_every_declared_v34_shape_is_what_upstreams_library_reads():
    read = _highest_index_read()
    for name, shape in V34.items():
        if shape.extra is None:
            assert read[name] == (shape.keys, shape.args), name
    # Replay: 4 KEYS, or 7 + one per edge for a skipped flow member.
    assert read["ff_replay_execution"][0] == upstream_v34._REPLAY_SKIPPED.keys == 7


def test_our_signal_already_has_upstream_s_shape_and_a_v020_shaped_one_is_refused():
    k = ExecKeys(EID)
    ours = F.deliver_signal(k, lane="default", waitpoint_id="00000000-0000-4000-8000-0000000000aa",
                            signal_id="00000000-0000-4000-8000-0000000000bb", signal=F.Signal("go"), token="t")
    assert ours.keys[14] == "ff:part:{fp:5}:signal_delivery"
    assert to_v34(ours) == ours
    # A 14-KEY call upstream's Lua would read with a nil stream key never reaches it.
    assert to_v34(replace(ours, keys=ours.keys[:14])) is None


def test_a_v020_shaped_flow_cancel_gets_the_pending_set_the_backlog_and_the_default_grace():
    fid = "6ba7b810-9dad-41d1-80b4-00c04fd430c8"
    shaped = to_v34(F.cancel_flow(9, fid, reason="r"))
    assert shaped is not None
    assert shaped.keys[3:] == [f"ff:flow:{{fp:9}}:{fid}:pending_cancels", "ff:idx:{fp:9}:cancel_backlog"]
    assert len(shaped.args) == 5 and shaped.args[4] == ""


def test_a_stream_read_asks_upstream_for_every_frame():
    shaped = to_v34(F.read_attempt_stream(ExecKeys(EID), 0, count_limit=10))
    assert shaped is not None and shaped.args == ["-", "+", 10, ""] and shaped.readonly


def test_a_call_upstream_would_misread_is_refused_before_anything_is_sent(upstream, upstream_backend):
    eid = upstream.create()
    fence = upstream.take(eid)
    before = upstream.core(eid)
    with pytest.raises(NotOnUpstream) as e:  # v0.2.0's 5 ARGV; v34 reads a 6th (source)
        upstream_backend.call(F.complete_execution(ExecKeys(eid), fence, b"done"))
    assert "ff_complete_execution" in str(e.value) and "v0.14-v0.15" in str(e.value)
    with pytest.raises(NotOnUpstream):
        upstream_backend.call_many([F.complete_execution(ExecKeys(eid), fence, b"done")])
    assert upstream.core(eid) == before and upstream.library_unchanged()


def test_on_v013_reads_pass_and_writes_are_refused_rather_than_guessed():
    mode = UpstreamMode(Detected("upstream-v0.13", "31", None, 57))
    read = F.Call("ff_read_attempt_stream", ["a", "b"], ["-", "+", 10], readonly=True)
    assert mode.shape(read) is read
    with pytest.raises(NotOnUpstream) as e:
        mode.shape(F.change_priority(ExecKeys(EID), lane="default", priority=3))
    assert "v0.13" in str(e.value)
