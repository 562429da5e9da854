"""Read models: waitpoints inbox and signals."""

from __future__ import annotations
