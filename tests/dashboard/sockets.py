"""Running a websocket test's coroutine: on a loop of its own, with a bound, closing the live hub after."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from dashboard import live
from tests.bounded import arun


def run(main: Callable[[], Awaitable[Any]]) -> Any:
    async def wrapped() -> Any:
        try:
            return await asyncio.wait_for(main(), 20)
        finally:
            await asyncio.wait_for(live.hub().close(), 10)

    return arun(wrapped())
