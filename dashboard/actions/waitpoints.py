"""Operator actions: waitpoints inbox and signals (audited, like dashboard.actions)."""

from __future__ import annotations
