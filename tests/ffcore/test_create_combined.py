"""Concurrent plain creates share round trips (issue #21, S1-threads): ffcore.execution.combine and
Client.create on it."""

from __future__ import annotations

import threading

import pytest

from ffcore.execution.client import Client
from ffcore.execution.combine import Combiner
from ffcore.keys import ExecKeys
from ffcore.worker.worker import Registry, Worker, WorkerConfig


class _Gate:
    """A send function whose first call blocks until released, recording every batch."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, items: list[int]) -> list[int | BaseException]:
        self.batches.append(list(items))
        if len(self.batches) == 1:
            self.entered.set()
            assert self.release.wait(10)
        return [ValueError(f"bad {i}") if i < 0 else i * 10 for i in items]


def _submit_all(comb: Combiner[int, int], items: list[int], out: dict[int, object]) -> list[threading.Thread]:
    def one(i: int) -> None:
        try:
            out[i] = comb.submit(i)
        except ValueError as e:
            out[i] = e

    threads = [threading.Thread(target=one, args=(i,)) for i in items]
    for t in threads:
        t.start()
    return threads


def test_creates_queued_during_a_round_trip_go_out_together_in_the_next():
    gate = _Gate()
    comb: Combiner[int, int] = Combiner(gate)
    out: dict[int, object] = {}
    first = _submit_all(comb, [1], out)
    assert gate.entered.wait(10)  # the first caller's round trip is in flight, alone
    rest = _submit_all(comb, [2, 3, -4, 5], out)
    while len(comb._queue) < 4:  # queued behind it
        threading.Event().wait(0.005)
    gate.release.set()
    for t in first + rest:
        t.join(10)
    assert gate.batches[0] == [1]
    assert sorted(gate.batches[1]) == [-4, 2, 3, 5] and len(gate.batches) == 2
    assert out[1] == 10 and out[2] == 20 and out[3] == 30 and out[5] == 50
    assert isinstance(out[-4], ValueError)  # its own error, to its caller only
    assert not comb._leading and not comb._queue


def test_a_failed_round_trip_fails_its_callers_and_the_next_one_goes_out():
    calls: list[list[int]] = []

    def send(items: list[int]) -> list[int | BaseException]:
        calls.append(items)
        if len(calls) == 1:
            raise ConnectionError("down")
        return list(items)

    comb: Combiner[int, int] = Combiner(send)
    with pytest.raises(ConnectionError):
        comb.submit(1)
    assert comb.submit(2) == 2


def test_many_threads_creating_each_get_their_own_execution(backend):
    client = Client(backend)
    results: dict[int, list[str]] = {k: [] for k in range(8)}

    def producer(k: int) -> None:
        for j in range(20):
            r = client.create(kind="combined", lane="comb", payload=f"{k}:{j}")
            results[k].append(str(r.execution_id))

    threads = [threading.Thread(target=producer, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    eids = [e for k in range(8) for e in results[k]]
    assert len(eids) == 160 and len(set(eids)) == 160
    for k in range(8):
        for j, e in enumerate(results[k]):
            assert backend.client.get(ExecKeys(e).payload) == f"{k}:{j}".encode()  # each caller its own result
    w = Worker(backend, WorkerConfig(lanes=("comb",), concurrency=64), Registry())
    got = []
    while len(got) < 160 and (batch := w.claim_next(64)):
        got += batch
    assert sorted(str(t.execution_id) for t in got) == sorted(eids)


def test_a_refused_create_is_its_own_outcome_in_a_shared_round_trip(backend):
    client = Client(backend)
    ok = client.create(kind="k", lane="comb2")
    # A create the server refuses (a malformed deadline), sent in one round trip with a good one.
    bad = client.create_call(kind="k", lane="comb2")
    bad.args[11] = "soon"
    good = client.create_call(kind="k", lane="comb2")
    outs = client._create_plain_each([bad, good])
    assert isinstance(outs[0], Exception)
    assert not isinstance(outs[1], Exception) and backend.client.exists(ExecKeys(outs[1].execution_id).core)
    assert backend.client.exists(ExecKeys(ok.execution_id).core)
