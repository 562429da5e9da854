"""The public entry point: `from ffcore.client import Client` (the class lives in ffcore.execution.client)."""

from __future__ import annotations

from ffcore.execution.client import Client

__all__ = ["Client"]
