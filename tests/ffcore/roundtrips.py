"""Counting a backend's round trips (client pipelines opened and read_many batches) around a block:
bounds on reads per page."""

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

    real_many = backend.read_many

    def counting_many(*a: Any, **kw: Any) -> Any:
        trips.append(1)
        return real_many(*a, **kw)

    backend.client.pipeline = counting
    backend.read_many = counting_many  # type: ignore[method-assign]
    try:
        yield trips
    finally:
        backend.client.pipeline = real
        del backend.read_many
