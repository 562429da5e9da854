"""FlowFabric for Python — the engine core (plain Python, never imports Django)."""

from __future__ import annotations

__version__ = "0.1.0"
