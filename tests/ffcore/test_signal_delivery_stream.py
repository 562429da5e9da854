"""The partition's signal-delivery stream (v0.13+'s 15th key of ff_deliver_signal): one entry per accepted signal,
none for a duplicate or a refused one — what upstream's signal-delivery subscribers read."""

from __future__ import annotations

import pytest

from ffcore.errors import ScriptError
from ffcore.keys import ExecKeys
from ffcore.reads import decode_map
from ffcore.suspension.conditions import quorum
from ffcore.suspension.signals import APPENDED, RESUMED
from tests.ffcore.suspension_support import claimed, signal


def entries(hb, eid):
    return [decode_map(fields) for _id, fields in hb.client.xrange(ExecKeys(eid).idx.signal_delivery)]


def test_each_accepted_signal_adds_one_entry_and_a_duplicate_or_a_bad_token_adds_none(hb):
    t = claimed(hb)
    eid = t.execution_id
    out = t.suspend(quorum(2, of=3, name="approve"))
    before = len(entries(hb, eid))  # other tests may share the partition's stream
    first = signal(hb, eid, out.waitpoint_id, out.token, "approve", source_identity="ann", idempotency_key="k1")
    assert first.effect == APPENDED
    again = signal(hb, eid, out.waitpoint_id, out.token, "approve", source_identity="ann", idempotency_key="k1")
    assert again.duplicate
    with pytest.raises(ScriptError):
        signal(hb, eid, out.waitpoint_id, "0:" + "0" * 64, "approve", source_identity="eve")
    second = signal(hb, eid, out.waitpoint_id, out.token, "approve", source_identity="bob")
    assert second.effect == RESUMED
    got = entries(hb, eid)[before:]
    assert [(e["source_identity"], e["effect"], e["signal_id"]) for e in got] == [
        ("ann", APPENDED, first.signal_id), ("bob", RESUMED, second.signal_id)]
    assert {e["execution_id"] for e in got} == {str(eid)}
    assert {e["waitpoint_id"] for e in got} == {out.waitpoint_id}
    assert all(int(e["delivered_at_ms"]) > 0 for e in got)
