"""Pages: flows and the DAG view."""

from __future__ import annotations

from typing import Any

urlpatterns: list[Any] = []
