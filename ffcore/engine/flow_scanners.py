"""Scanners: dependency reconciler and cancel-flow backlog."""

from __future__ import annotations

from ..backend import Backend
from .base import Scanner


def scanners(backend: Backend) -> list[Scanner]:
    """The scanners of this area, configured from backend.settings."""
    return []
