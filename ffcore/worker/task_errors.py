"""What every part of a claimed task (task.py and its suspend, usage and stream mixins) agrees on: the
errors a task raises and the reply codes that mean its lease is gone."""

from __future__ import annotations

import redis

#: Codes that mean "this lease is no longer ours" (any task operation, suspend included).
LEASE_GONE = frozenset({"stale_lease", "lease_expired", "lease_revoked", "execution_not_active",
                        "execution_not_found", "stale_owner_cannot_append", "stream_closed",
                        "invalid_lease_for_suspend"})
#: Errors after which a call may or may not have been applied.
TRANSPORT = (redis.ConnectionError, redis.TimeoutError)


class TaskConsumed(RuntimeError):
    """A terminal operation was already called on this task."""


class LeaseLost(RuntimeError):
    """The lease is gone (expired, revoked, cancelled or taken over); stop working on this attempt."""
