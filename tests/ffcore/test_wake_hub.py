"""The wake hub (issue #21, S4): the workers of one process listening on one server share ONE pub/sub connection
and thread; each gets the messages of its own channels, in order, is told it listens once its channels are
confirmed, and leaves without disturbing the others."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ffcore.worker.wake_hub import Listener, WakeHub

from ffcore import keys
from ffcore.connection import make_client
from ffcore.errors import ConfigError
from ffcore.execution.client import Client
from ffcore.worker import wake_hub
from ffcore.worker.worker import Registry, Worker, WorkerConfig

from .workerkit import running


def _until(cond: Callable[[], bool], what: str, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.005)


def _numsub(backend: Any, channel: str) -> int:
    return int(dict(backend.client.pubsub_numsub(channel))[channel.encode()])


class Recorder:
    """A listener's callbacks, recorded."""

    def __init__(self, name: str, channels: set[str], on_listening: Callable[[bool], None] | None = None) -> None:
        self.got: list[tuple[str, bytes]] = []
        self.states: list[bool] = []
        self.errors: list[BaseException] = []
        self._on_listening = on_listening
        self.shared: list[bool] = []
        self.listener = Listener(name, frozenset(channels), self._deliver, self._listening, self.errors.append)

    def _deliver(self, batch: list[tuple[str, bytes]], shared: bool) -> None:
        self.got.extend(batch)
        self.shared.append(shared)

    def _listening(self, live: bool) -> None:
        if self._on_listening is not None:
            self._on_listening(live)
        self.states.append(live)


def test_listeners_share_one_connection_and_each_gets_its_own_channels_in_order(backend):
    hub = WakeHub(lambda: make_client(backend.url))
    a, b = Recorder("a", {"t:hub:a", "t:hub:both"}), Recorder("b", {"t:hub:b", "t:hub:both"})
    hub.join(a.listener)
    hub.join(b.listener)
    try:
        _until(lambda: a.states == [True] and b.states == [True], "both listening")
        assert _numsub(backend, "t:hub:both") == 1  # one connection for both
        for ch, data in (("t:hub:a", b"1"), ("t:hub:both", b"2"), ("t:hub:b", b"3"), ("t:hub:a", b"4")):
            backend.client.publish(ch, data)
        _until(lambda: len(a.got) == 3 and len(b.got) == 2, "delivered")
        assert a.got == [("t:hub:a", b"1"), ("t:hub:both", b"2"), ("t:hub:a", b"4")]
        assert b.got == [("t:hub:both", b"2"), ("t:hub:b", b"3")]
        # A read holding "t:hub:both" is flagged shared for both (their hint claims go to their own threads).
        assert True in a.shared and True in b.shared
        hub.leave(a.listener)
        _until(lambda: _numsub(backend, "t:hub:a") == 0, "a's own channel left")
        assert _numsub(backend, "t:hub:both") == 1  # still b's
        backend.client.publish("t:hub:both", b"5")
        _until(lambda: b.got[-1:] == [("t:hub:both", b"5")], "b still served")
        assert len(a.got) == 3
    finally:
        hub.leave(a.listener)
        hub.leave(b.listener)
    _until(lambda: hub._thread is None, "the hub's thread ends with its last member")
    assert _numsub(backend, hub.control) == 0


def test_a_listener_joining_a_running_hub_is_told_once_its_channels_are_confirmed(backend):
    hub = WakeHub(lambda: make_client(backend.url))
    first = Recorder("first", {"t:hub:first"})
    hub.join(first.listener)
    seen: list[int] = []
    late = Recorder("late", {"t:hub:late"}, on_listening=lambda live: seen.append(_numsub(backend, "t:hub:late")))
    try:
        _until(lambda: first.states == [True], "first listening")
        hub.join(late.listener)
        _until(lambda: late.states == [True], "late listening", timeout_s=2.0)  # poked: not after a read timeout
        assert seen == [1]  # subscribed on the server when it was told
        backend.client.publish("t:hub:late", b"x")
        _until(lambda: late.got == [("t:hub:late", b"x")], "late served")
    finally:
        hub.leave(first.listener)
        hub.leave(late.listener)


def test_a_lost_connection_is_told_and_subscribed_again(backend):
    hub = WakeHub(lambda: make_client(backend.url))
    r = Recorder("r", {"t:hub:lost"})
    hub.join(r.listener)
    try:
        _until(lambda: r.states == [True], "listening")
        backend.client.execute_command("CLIENT", "KILL", "TYPE", "pubsub")
        _until(lambda: r.states == [True, False, True], "lost, then listening again")
        backend.client.publish("t:hub:lost", b"after")
        _until(lambda: r.got == [("t:hub:lost", b"after")], "served again")
    finally:
        hub.leave(r.listener)


def test_a_listener_failing_for_good_is_dropped_and_the_others_go_on(backend):
    hub = WakeHub(lambda: make_client(backend.url))
    ok = Recorder("ok", {"t:hub:shared"})
    bad = Recorder("bad", {"t:hub:shared"})

    def deliver(batch: list[tuple[str, bytes]], shared: bool) -> None:
        raise ConfigError("broken")

    bad.listener.deliver = deliver
    hub.join(ok.listener)
    hub.join(bad.listener)
    try:
        _until(lambda: ok.states == [True] and bad.states == [True], "listening")
        backend.client.publish("t:hub:shared", b"1")
        _until(lambda: len(bad.errors) == 1, "bad failed")
        assert isinstance(bad.errors[0], ConfigError)
        assert hub.members() == 1
        backend.client.publish("t:hub:shared", b"2")
        _until(lambda: ok.got == [("t:hub:shared", b"1"), ("t:hub:shared", b"2")], "ok served throughout")
    finally:
        hub.leave(ok.listener)


def test_workers_of_one_process_share_the_subscription_and_a_stopping_one_leaves_it(backend):
    lane = "hub-lane"
    ran: dict[str, list[str]] = {"w1": [], "w2": []}
    workers = {}
    for name in ran:
        reg = Registry()

        @reg.handler("*")
        def body(task: Any, name: str = name) -> None:
            ran[name].append(str(task.execution_id))

        workers[name] = Worker(backend, WorkerConfig(lanes=(lane,), concurrency=2, worker_instance_id=f"hub-{name}"),
                               reg)
    with running([workers["w1"], workers["w2"]]) as (first, _):
        assert _numsub(backend, keys.lane_wake(lane)) == 1  # one connection per process and server
        assert _numsub(backend, keys.worker_wake("hub-w1")) == _numsub(backend, keys.worker_wake("hub-w2")) == 1
        c = Client(backend)
        eids = [str(c.create(kind="k", lane=lane, payload=b"").execution_id) for _ in range(6)]
        _until(lambda: sorted(ran["w1"] + ran["w2"]) == sorted(eids), "all ran")
        workers["w1"].stop()
        first.join(10)
        assert not first.is_alive()
        _until(lambda: _numsub(backend, keys.worker_wake("hub-w1")) == 0, "w1's channel left")  # the hub's thread
        assert _numsub(backend, keys.lane_wake(lane)) == 1  # w2's
        more = str(c.create(kind="k", lane=lane, payload=b"").execution_id)
        _until(lambda: more in ran["w2"], "the other worker still woken")
        assert wake_hub.hub(backend.url).members() >= 1
