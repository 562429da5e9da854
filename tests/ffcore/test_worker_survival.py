"""A worker and the scanners survive failures they did not expect: each loop (claim, renewal, completion,
wake listener, scanner tick) meets injected errors from the backend, logs them naming the loop, backs off,
and carries on; the worker still completes work and keeps its leases meanwhile. Only a configuration
error stops it."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from ffcore import keys, subscriber
from ffcore.backend import Backend
from ffcore.engine.base import run_scanners
from ffcore.engine.lease_expiry import LeaseExpiryScanner
from ffcore.errors import ConfigError
from ffcore.execution.client import Client
from ffcore.keys import ExecKeys
from ffcore.worker.worker import Registry, Worker, WorkerConfig

from .invariants import check, claim, create

LANE = "survive"


class Faulty:
    """Wraps a method: the calls `when` picks raise `error` while `failing` (or for the first `times` of
    them), every other call goes through."""

    def __init__(self, real: Callable[..., Any], error: BaseException, *, times: int | None = None,
                 when: Callable[..., bool] = lambda *a, **k: True) -> None:
        self.real, self.error, self.times, self.when = real, error, times, when
        self.failing = times is None
        self.raised = 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.when(*args, **kwargs) and (self.failing or (self.times is not None and self.raised < self.times)):
            self.raised += 1
            raise self.error
        return self.real(*args, **kwargs)


def _calls_named(prefix: str) -> Callable[..., bool]:
    def match(calls: Any, *_: Any, **__: Any) -> bool:
        return any(c.function.startswith(prefix) for c in (calls if isinstance(calls, list | tuple) else [calls]))
    return match


class Running:
    """A Worker's run loop on a thread (no signal handlers), handlers that can be held."""

    def __init__(self, backend: Backend, **cfg: Any) -> None:
        self.release = threading.Event()
        self.started = threading.Event()
        reg = Registry()

        @reg.handler("job")
        def job(task: Any) -> dict[str, int]:
            return {"attempt": task.attempt_index}

        @reg.handler("held")
        def held(task: Any) -> dict[str, int]:
            self.started.set()
            assert self.release.wait(20)
            return {"attempt": task.attempt_index}

        cfg.setdefault("lanes", (LANE,))
        cfg.setdefault("concurrency", 2)
        self.worker = Worker(backend, WorkerConfig(**cfg), reg)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="survivor", daemon=True)

    def _run(self) -> None:
        try:
            self.worker.run(install_signal_handlers=False)
        except BaseException as e:  # noqa: BLE001 - the test reads it
            self.error = e

    def __enter__(self) -> Running:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.release.set()
        self.worker.stop()
        self.thread.join(timeout=15)


@pytest.fixture
def logged(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    caplog.set_level(logging.INFO, logger="ffcore")
    yield caplog


def _until(ok: Callable[[], bool], timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not ok():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def _lease(backend: Backend, eid: str) -> tuple[int, str]:
    """(lease_expires_at, ownership_state), read in one command while the worker renews it."""
    at, owner = backend.client.hmget(ExecKeys(eid).core, ["lease_expires_at", "ownership_state"])
    return int(at or 0), owner.decode()


def _completed(backend: Backend, eid: str) -> bool:
    # One field, read atomically (the invariant check reads several keys: not while the worker moves it).
    return backend.client.hget(ExecKeys(eid).core, "public_state") == b"completed"


def test_the_claim_loop_survives_failing_claims(backend, monkeypatch, logged):
    eid = Client(backend).create(kind="job", lane=LANE).execution_id
    faulty = Faulty(backend.call_many, redis.ResponseError("ERR injected"), times=3, when=_calls_named("ff_claim"))
    monkeypatch.setattr(backend, "call_many", faulty)
    with Running(backend) as r:
        _until(lambda: _completed(backend, eid))
        assert r.thread.is_alive() and r.error is None
    assert faulty.raised == 3
    assert "claim loop failed (ResponseError: ERR injected); retrying in 0.1 s" in logged.text
    assert "retrying in 0.4 s" in logged.text  # backed off, doubling


def test_a_held_lease_is_renewed_while_the_claim_loop_fails(backend, monkeypatch, logged):
    held = Client(backend).create(kind="held", lane=LANE).execution_id
    faulty = Faulty(backend.call_many, RuntimeError("injected"), when=_calls_named("ff_claim"))
    faulty.failing = False
    monkeypatch.setattr(backend, "call_many", faulty)
    with Running(backend, lease_ttl_ms=600) as r:
        assert r.started.wait(10)
        faulty.failing = True  # from now on every claim fails
        first, _ = _lease(backend, held)
        time.sleep(1.5)  # 2.5 TTLs: the lease would be gone without renewals
        later, owner = _lease(backend, held)
        assert faulty.raised >= 2
        assert later > first and owner == "leased"
        faulty.failing = False
        r.release.set()
        _until(lambda: _completed(backend, held))
        after = Client(backend).create(kind="job", lane=LANE).execution_id
        _until(lambda: _completed(backend, after))
        assert r.thread.is_alive() and r.error is None
    assert check(backend, held)["total_attempt_count"] == "1"  # never reclaimed
    assert "claim loop failed (RuntimeError: injected)" in logged.text


def test_the_driver_survives_failing_renewals_and_keeps_the_lease(backend, monkeypatch, logged):
    eid = Client(backend).create(kind="held", lane=LANE).execution_id
    faulty = Faulty(backend.call_many, redis.ResponseError("ERR injected"), times=2,
                    when=_calls_named("ff_renew_lease"))
    monkeypatch.setattr(backend, "call_many", faulty)
    with Running(backend, lease_ttl_ms=900) as r:
        assert r.started.wait(10)
        _until(lambda: faulty.raised == 2)
        renewed, _ = _lease(backend, eid)
        _until(lambda: _lease(backend, eid)[0] > renewed)  # renewing again
        r.release.set()
        _until(lambda: _completed(backend, eid))
        assert r.thread.is_alive() and r.error is None  # the driver runs on the run() thread
    assert check(backend, eid)["total_attempt_count"] == "1"
    assert "lease renewal of 1 tasks failed (ResponseError: ERR injected); retrying in 0.1 s" in logged.text


def test_a_failing_completion_is_retried_while_the_lease_is_kept(backend, monkeypatch, logged):
    eid = Client(backend).create(kind="job", lane=LANE).execution_id
    faulty = Faulty(backend.call_many, RuntimeError("injected"), times=3, when=_calls_named("ff_complete"))
    monkeypatch.setattr(backend, "call_many", faulty)
    with Running(backend, lease_ttl_ms=3000) as r:
        _until(lambda: _completed(backend, eid))
        later = Client(backend).create(kind="job", lane=LANE).execution_id
        _until(lambda: _completed(backend, later))
        assert r.thread.is_alive() and r.error is None
    assert faulty.raised == 3
    assert check(backend, eid)["total_attempt_count"] == "1"  # the first attempt's result, not a reclaim
    assert f"completion of 1 tasks on partition {eid.partition_index} lane {LANE} failed " \
           "(RuntimeError: injected); retrying in 0.1 s" in logged.text


def test_the_wake_listener_resubscribes_after_failures(backend, monkeypatch, logged):
    faulty = Faulty(subscriber.subscribe, redis.ResponseError("ERR injected"), times=3)
    monkeypatch.setattr(subscriber, "subscribe", faulty)
    channel = keys.lane_wake(LANE)
    with Running(backend) as r:
        _until(lambda: dict(backend.client.pubsub_numsub(channel)).get(channel.encode()) == 1)  # subscribed again
        eid = Client(backend).create(kind="job", lane=LANE).execution_id
        _until(lambda: _completed(backend, eid))
        assert r.thread.is_alive() and r.error is None
    assert faulty.raised == 3
    assert "wake listener failed (ResponseError: ERR injected); retrying in 0.1 s" in logged.text


def test_a_configuration_error_stops_the_worker(backend, monkeypatch):
    Client(backend).create(kind="job", lane=LANE)
    monkeypatch.setattr(backend, "call_many", Faulty(backend.call_many, ConfigError("bad setting"),
                                                     when=_calls_named("ff_claim")))
    with Running(backend) as r:
        r.thread.join(timeout=10)
        assert not r.thread.is_alive()
        assert isinstance(r.error, ConfigError)


def test_a_scanner_thread_backs_off_and_goes_on_after_failed_ticks(backend, monkeypatch, logged):
    eid = create(backend)
    claim(backend, eid, ttl_ms=100)
    faulty = Faulty(backend.now_ms, redis.ResponseError("ERR injected"), times=3)
    monkeypatch.setattr(backend, "now_ms", faulty)
    stop = threading.Event()
    t = threading.Thread(target=run_scanners, args=([LeaseExpiryScanner(backend, interval_ms=50)], stop), daemon=True)
    t.start()
    try:
        _until(lambda: check(backend, eid)["ownership_state"] == "lease_expired_reclaimable")
        assert t.is_alive()
    finally:
        stop.set()
        t.join(timeout=5)
    assert faulty.raised == 3
    assert "scanner lease_expiry failed (ResponseError: ERR injected); retrying in 0.1 s" in logged.text
    assert "retrying in 0.4 s" in logged.text


def test_scanners_stop_on_a_configuration_error(backend, monkeypatch):
    monkeypatch.setattr(backend, "now_ms", Faulty(backend.now_ms, ConfigError("bad setting")))
    with pytest.raises(ConfigError):
        run_scanners([LeaseExpiryScanner(backend, interval_ms=50)], threading.Event())
