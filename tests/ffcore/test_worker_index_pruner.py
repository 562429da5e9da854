"""ff:idx:workers is pruned: an id stays while its worker is live, stale or gone (the roster's hour), and is
removed by the scanner once nothing of its registration is left."""

from __future__ import annotations

import time

from ffcore import keys
from ffcore.engine.registry import build_scanners
from ffcore.engine.worker_index import WorkerIndexPruner, prune_worker_index
from ffcore.reads import text
from ffcore.worker.heartbeat import Heartbeat, alive_key, roster


def _hb(backend, wiid, lease_ttl_ms=5000, interval_ms=1000):
    return Heartbeat(backend, worker_id="w", wiid=wiid, lanes=("l",), capabilities_csv="", concurrency=1,
                     interval_ms=interval_ms, lease_ttl_ms=lease_ttl_ms)


def _index(backend):
    return sorted(text(x) for x in backend.client.smembers(keys.WORKERS_INDEX))


def test_it_removes_only_ids_whose_registration_has_been_gone_past_the_gone_window(backend):
    _hb(backend, "wi-live").register()
    # Registration 300 ms (3 intervals): it expires by itself, the "seen" key an hour later.
    _hb(backend, "wi-gone", lease_ttl_ms=100, interval_ms=100).register()
    _hb(backend, "wi-old", lease_ttl_ms=100, interval_ms=100).register()
    deadline = time.monotonic() + 5
    while backend.client.exists(keys.worker("wi-gone"), keys.worker("wi-old")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not backend.client.exists(alive_key("wi-gone"), alive_key("wi-old"))
    # An hour passes for wi-old only: its "seen" key expires (its TTL is the registration's plus the hour).
    backend.client.pexpire(keys.worker_seen("wi-old"), 1)
    time.sleep(0.01)
    before = roster(backend)[1]
    assert prune_worker_index(backend) == 1
    assert _index(backend) == ["wi-gone", "wi-live"]
    now, after = roster(backend)
    assert after == before and {w.worker_instance_id: w.status(now) for w in after} == {"wi-live": "live",
                                                                                          "wi-gone": "gone"}
    assert prune_worker_index(backend) == 0  # nothing more to remove


def test_a_worker_that_comes_back_after_being_pruned_is_indexed_again_by_its_heartbeat(backend):
    backend.client.sadd(keys.WORKERS_INDEX, "wi-back")  # an id with no registration at all
    assert prune_worker_index(backend) == 1 and _index(backend) == []
    _hb(backend, "wi-back").register()
    assert _index(backend) == ["wi-back"]


def test_the_pruner_is_one_of_the_scanners_and_pages_through_a_large_index(backend):
    backend.client.sadd(keys.WORKERS_INDEX, *[f"wi-{n}" for n in range(450)])
    _hb(backend, "wi-7").register()
    [pruner] = [s for s in build_scanners(backend) if isinstance(s, WorkerIndexPruner)]
    pruner.batch = 100  # several SSCAN pages
    assert pruner.tick() == 449
    assert _index(backend) == ["wi-7"] and pruner.stats.ticks == 1 and pruner.stats.acted == 449
