"""The worker roster (#25 item 6): live while the heartbeat is on time, stale (leases still listed) once it is
late until the registration expires, then gone for an hour."""

from __future__ import annotations

from ffcore import keys
from ffcore.execution.client import Client
from ffcore.worker.heartbeat import GONE_KEEP_MS, LATE_BEATS, Heartbeat, lease_expiries, roster
from ffcore.workers import list_workers


def _hb(backend, wiid="wi-roster", interval_ms=1000, lease_ttl_ms=5000):
    return Heartbeat(backend, worker_id="demo-a", wiid=wiid, lanes=("l",), capabilities_csv="", concurrency=2,
                     interval_ms=interval_ms, lease_ttl_ms=lease_ttl_ms)


def _statuses(backend):
    now, ws = roster(backend)
    return {w.worker_instance_id: w.status(now) for w in ws}


def test_a_worker_on_time_is_live_and_listed(backend):
    hb = _hb(backend)
    hb.register()
    assert _statuses(backend) == {"wi-roster": "live"}
    assert [w.worker_instance_id for w in list_workers(backend)] == ["wi-roster"]


def test_a_late_heartbeat_makes_the_worker_stale_with_its_leases_until_the_registration_expires(backend):
    eid = Client(backend).create(kind="k").execution_id
    hb = _hb(backend)
    hb.register()
    hb.beat([eid])
    k = keys.worker("wi-roster")
    # The registration lasts twice the lease TTL, longer than the late threshold.
    assert backend.client.pttl(k) > LATE_BEATS * 1000
    now = backend.now_ms()
    backend.client.hset(k, "last_heartbeat_at", str(now - LATE_BEATS * 1000 - 1))
    (w,) = roster(backend)[1]
    assert w.status(backend.now_ms()) == "stale" and w.leases == [eid]
    assert w.stale_since() == now - 1
    assert list_workers(backend) == []  # not counted as live
    assert lease_expiries(backend, [eid, "not-an-id"]) == {eid: 0}


def test_an_expired_registration_reads_gone_for_an_hour_then_the_worker_is_no_longer_listed(backend):
    hb = _hb(backend)
    hb.register()
    backend.client.delete(keys.worker("wi-roster"))  # what the registration's TTL does
    (w,) = roster(backend)[1]
    assert w.status(backend.now_ms()) == "gone" and w.last_heartbeat_at > 0
    assert backend.client.pttl(keys.worker_seen("wi-roster")) > GONE_KEEP_MS
    backend.client.delete(keys.worker_seen("wi-roster"))
    assert roster(backend)[1] == []


def test_a_clean_stop_unregisters_at_once(backend):
    hb = _hb(backend)
    hb.register()
    hb.unregister()
    assert roster(backend)[1] == [] and not backend.client.exists(keys.worker_seen("wi-roster"))
