"""Claimed-task operations: suspend, pending waitpoints and resume signals (mixed into ClaimedTask)."""

from __future__ import annotations


class SuspendOps:
    """Methods here use the ClaimedTask attributes (backend, keys, fence, execution_id, attempt_index, ...)."""
