"""FCALL builders of budget.lua + quota.lua: budgets, usage, admission blocks, quota policies."""

from __future__ import annotations
