"""The suite's bounded waits fail a stuck test with the stacks that show where it is stuck, instead of hanging."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from tests.bounded import arun, join


def test_a_coroutine_still_running_at_the_bound_fails_naming_where_it_waits():
    async def stuck_in_here() -> None:
        await asyncio.sleep(30)

    started = time.monotonic()
    with pytest.raises(AssertionError, match="still running after 0.3 s") as failed:
        arun(stuck_in_here(), 0.3)
    assert time.monotonic() - started < 5
    assert "stuck_in_here" in str(failed.value)


def test_a_coroutine_s_result_and_error_come_back_to_the_test():
    async def answer() -> int:
        return 42

    async def broken() -> None:
        raise KeyError("inside")

    assert arun(answer()) == 42
    with pytest.raises(KeyError, match="inside"):
        arun(broken())


def test_a_thread_still_running_at_the_bound_fails_with_its_stack_and_is_left_behind():
    release = threading.Event()

    def waiting_for_release() -> None:
        release.wait(30)

    t = threading.Thread(target=waiting_for_release, daemon=True, name="held")
    t.start()
    try:
        with pytest.raises(AssertionError, match="thread held still running") as failed:
            join([t], 0.2)
        assert "waiting_for_release" in str(failed.value)
    finally:
        release.set()
    join(t, 5)
    assert not t.is_alive()
