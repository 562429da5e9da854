"""Waits that cannot hang the suite.

A test that blocks forever stalls the whole CI run: pytest-timeout's alarm fails the test, but leaving a
`with ThreadPoolExecutor()` block (or a bare `join()`) then waits for the stuck thread again, with no alarm left.
Here a stuck thread fails its test with the stacks of every thread and is left behind (daemon), never joined.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import traceback
from collections.abc import Coroutine, Iterable
from typing import Any, TypeVar

T = TypeVar("T")

#: A coroutine or a thread still running after this long fails its test.
DEFAULT_S = 60.0


def _stacks(loop: asyncio.AbstractEventLoop | None) -> str:
    out = []
    for ident, frame in sys._current_frames().items():
        name = next((t.name for t in threading.enumerate() if t.ident == ident), str(ident))
        out.append(f"--- thread {name}\n" + "".join(traceback.format_stack(frame)))
    if loop is not None:
        try:
            tasks = list(asyncio.all_tasks(loop))
        except RuntimeError:  # the set changed under us: the threads' stacks above still tell the story
            tasks = []
        for task in tasks:
            frames = task.get_stack()
            out.append(f"--- task {task.get_name()}\n" + "".join(traceback.format_list(
                [(f.f_code.co_filename, f.f_lineno, f.f_code.co_name, "") for f in frames])))
    return "\n".join(out)


def arun(coro: Coroutine[Any, Any, T], timeout_s: float = DEFAULT_S) -> T:
    """asyncio.run on a daemon thread of its own (Playwright's sync API keeps a loop running in the test's thread)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            with asyncio.Runner() as runner:
                box["loop"] = runner.get_loop()
                box["value"] = runner.run(coro)
        except BaseException as e:  # handed to the test's thread
            box["error"] = e

    t = threading.Thread(target=target, daemon=True, name="arun")
    t.start()
    t.join(timeout_s)
    if t.is_alive():
        raise AssertionError(f"coroutine still running after {timeout_s:g} s\n{_stacks(box.get('loop'))}")
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


def join(threads: threading.Thread | Iterable[threading.Thread], timeout_s: float = DEFAULT_S) -> None:
    """Join threads the test started, failing (not hanging) when one is still running after `timeout_s`."""
    group = [threads] if isinstance(threads, threading.Thread) else list(threads)
    for t in group:
        t.join(timeout_s)
        if t.is_alive():
            raise AssertionError(f"thread {t.name} still running after {timeout_s:g} s\n{_stacks(None)}")
