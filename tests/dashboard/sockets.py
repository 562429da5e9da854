"""Running a websocket test's coroutine: on a loop of its own, with a bound, closing the live hub after."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Awaitable, Callable
from typing import Any

from dashboard import live


def run(main: Callable[[], Awaitable[Any]]) -> Any:
    async def wrapped() -> Any:
        try:
            return await asyncio.wait_for(main(), 20)
        finally:
            await live.hub().close()

    # A thread of its own: Playwright's sync API (browser tests earlier in the run) keeps a loop running here.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, wrapped()).result()
