"""Websocket routes (consumers arrive with the live dashboard)."""

from typing import Any

websocket_urlpatterns: list[Any] = []
