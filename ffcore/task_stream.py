"""Claimed-task operations: attempt stream frames (mixed into ClaimedTask)."""

from __future__ import annotations


class StreamOps:
    """Methods here use the ClaimedTask attributes (backend, keys, fence, execution_id, attempt_index, ...)."""
