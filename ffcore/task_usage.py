"""Claimed-task operations: budget usage reports (mixed into ClaimedTask)."""

from __future__ import annotations


class UsageOps:
    """Methods here use the ClaimedTask attributes (backend, keys, fence, execution_id, attempt_index, ...)."""
