"""Scanners: budget reset and admission unblock reconcilers."""

from __future__ import annotations

from ..backend import Backend
from .base import Scanner


def scanners(backend: Backend) -> list[Scanner]:
    """The scanners of this area, configured from backend.settings."""
    return []
