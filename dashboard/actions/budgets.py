"""Operator actions: budgets and quotas (audited, like dashboard.actions)."""

from __future__ import annotations
