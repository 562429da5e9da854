"""Websocket routes: the live tail of an attempt stream and the pushed-refresh socket of every page."""

from typing import Any

from django.urls import path

from .consumers import LiveConsumer, StreamConsumer

websocket_urlpatterns: list[Any] = [
    path("ws/stream/<str:eid>/<int:attempt>/", StreamConsumer.as_asgi()),
    path("ws/live/", LiveConsumer.as_asgi()),
]
