"""Pages: budgets and quotas."""

from __future__ import annotations

from typing import Any

urlpatterns: list[Any] = []
