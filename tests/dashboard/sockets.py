"""Running a websocket test's coroutine: on a loop of its own, with a bound, closing the live hub after."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from channels.layers import get_channel_layer

from dashboard import live
from tests.bounded import arun


def run(main: Callable[[], Awaitable[Any]]) -> Any:
    async def wrapped() -> Any:
        try:
            return await asyncio.wait_for(main(), 20)
        finally:
            await asyncio.wait_for(live.hub().close(), 10)
            # Here, bounded: channels-redis would otherwise flush the layer unbounded while the loop closes.
            await asyncio.wait_for(get_channel_layer().flush(), 10)

    return arun(wrapped())
