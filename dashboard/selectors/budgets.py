"""Read models: budgets and quotas."""

from __future__ import annotations
