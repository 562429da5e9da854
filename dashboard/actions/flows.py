"""Operator actions: flows and the DAG view (audited, like dashboard.actions)."""

from __future__ import annotations
