"""Read models: flows and the DAG view."""

from __future__ import annotations
