"""A wake listener that fell behind answers the hints queued meanwhile with one claim (issue #21: one
claim per hint made every claim after the first come back empty)."""

from __future__ import annotations

import threading
import time

from ffcore import keys
from ffcore.worker.worker import Registry, Worker, WorkerConfig


def _until(cond, what: str) -> None:
    deadline = time.monotonic() + 10
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.005)


def test_hints_queued_while_the_listener_claims_are_answered_by_one_claim(backend):
    w = Worker(backend, WorkerConfig(lanes=("drain",), worker_instance_id="w-drain"), Registry())
    claims: list[float] = []
    gate = threading.Event()

    def claim_now() -> bool:
        claims.append(time.monotonic())
        if len(claims) == 1:
            assert gate.wait(10)  # busy claiming while more hints arrive
        return True

    w._claim_now = claim_now  # type: ignore[method-assign]
    w._listen()
    channel = keys.lane_wake("drain")
    try:
        _until(lambda: backend.client.pubsub_numsub(channel)[0][1] >= 1, "listener subscribed")
        backend.client.publish(channel, "1")
        _until(lambda: len(claims) == 1, "first hint claimed")
        for n in range(2, 7):
            backend.client.publish(channel, str(n))
        backend.client.ping()  # the server has written the five hints to the listener's socket
        gate.set()
        _until(lambda: len(claims) == 2, "queued hints claimed")
        backend.client.publish(channel, "7")  # a later hint: a claim of its own
        _until(lambda: len(claims) == 3, "later hint claimed")
        assert len(claims) == 3  # 1 + one for the five queued + 1, not 7
        assert {n for n, _ in w.claimer._registry} >= set(range(1, 8))  # every hinted partition is known
    finally:
        w._stop.set()
        w._unlisten()
    # Left the hub: its channels are unsubscribed.
    _until(lambda: backend.client.pubsub_numsub(keys.worker_wake("w-drain"))[0][1] == 0, "own channel left")
