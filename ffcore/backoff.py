"""Loops that survive what they did not expect: log with context, pause, try again.

A worker's claim, renewal, completion and wake-listener loops and every scanner thread treat any failure
the same way: log it naming the loop (with the traceback on the first of a run of failures, unless it is a
plain transport error), pause FIRST_PAUSE_S doubling up to a cap, and start over from FIRST_PAUSE_S after
a success. Waiting cannot heal a bad configuration or a library that will not load (`FATAL`): those end
the loop, and with it the process.
"""

from __future__ import annotations

import logging

import redis

from .errors import ConfigError, LibraryError, ReplicationTimeout

#: First pause after a failure, seconds; it doubles per failure in a row up to MAX_PAUSE_S.
FIRST_PAUSE_S = 0.1
MAX_PAUSE_S = 5.0
#: What no retry can fix.
FATAL = (ConfigError, LibraryError)
#: Failures that speak for themselves (Valkey restarting, a failover): logged without a traceback.
TRANSPORT = (redis.ConnectionError, redis.TimeoutError, ReplicationTimeout)


class Backoff:
    """The pause schedule of one loop."""

    def __init__(self, first_s: float = FIRST_PAUSE_S, max_s: float = MAX_PAUSE_S) -> None:
        self.first_s = first_s
        self.max_s = max_s
        #: Failures in a row (0 after a success).
        self.failures = 0

    def reset(self) -> None:
        self.failures = 0

    def next_pause(self) -> float:
        """Count a failure; the pause before the next try."""
        pause = min(self.first_s * 2.0 ** min(self.failures, 30), self.max_s)
        self.failures += 1
        return pause

    def failed(self, loop: str, e: BaseException, logger: logging.Logger) -> float:
        """Log `loop`'s failure `e` and return the pause before its next try; re-raises what cannot heal."""
        if isinstance(e, FATAL):
            raise e
        pause = self.next_pause()
        logger.warning("%s failed (%s: %s); retrying in %.1f s", loop, type(e).__name__, e, pause,
                       exc_info=self.failures == 1 and not isinstance(e, TRANSPORT))
        return pause
