"""A driver that fell behind answers the hints queued meanwhile with one claim (issue #21: one
claim per hint made every claim after the first come back empty)."""

from __future__ import annotations

import threading
import time

from ffcore import keys
from ffcore.worker.worker import Registry, Worker, WorkerConfig

from .workerkit import running


def _until(cond, what: str) -> None:
    deadline = time.monotonic() + 10
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.005)


def test_hints_queued_while_the_driver_claims_are_answered_by_one_claim(backend):
    w = Worker(backend, WorkerConfig(lanes=("drain",), worker_instance_id="w-drain", poll_interval_ms=60_000,
                                     listening_poll_interval_ms=60_000), Registry())
    w.driver._idle_s = 30.0  # no empty-handed polls meanwhile: every claim below answers a hint
    claims: list[float] = []
    gate = threading.Event()
    real = w.claim_next
    counting = threading.Event()

    def claim_next(n: int = 1) -> list:
        if counting.is_set():
            claims.append(time.monotonic())
            if len(claims) == 1:
                assert gate.wait(10)  # busy claiming while more hints arrive
        return real(n)

    w.claim_next = claim_next  # type: ignore[method-assign]
    channel = keys.lane_wake("drain")
    with running([w]):
        time.sleep(0.1)  # past the first claim (the one listing it idle)
        counting.set()
        backend.client.publish(channel, "1")
        _until(lambda: len(claims) == 1, "first hint claimed")
        for n in range(2, 7):
            backend.client.publish(channel, str(n))
        backend.client.ping()  # the server has written the five hints to the driver's socket
        gate.set()
        _until(lambda: len(claims) == 2, "queued hints claimed")
        backend.client.publish(channel, "7")  # a later hint: a claim of its own
        _until(lambda: len(claims) == 3, "later hint claimed")
        time.sleep(0.05)
        assert len(claims) == 3  # 1 + one for the five queued + 1, not 7
        assert {n for n, _ in w.claimer._registry} >= set(range(1, 8))  # every hinted partition is known
    # Stopped: its channels are unsubscribed.
    _until(lambda: backend.client.pubsub_numsub(keys.worker_wake("w-drain"))[0][1] == 0, "own channel left")
