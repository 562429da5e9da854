"""Counting a backend's round trips (pipelines opened) around a block: bounds on reads per page."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ffcore.backend import Backend


@contextmanager
def counting_pipelines(backend: Backend) -> Iterator[list[int]]:
    trips: list[int] = []
    real = backend.client.pipeline

    def counting(*a: Any, **kw: Any) -> Any:
        trips.append(1)
        return real(*a, **kw)

    backend.client.pipeline = counting
    try:
        yield trips
    finally:
        backend.client.pipeline = real
