"""The worker side: the run loop, claiming, lease renewal, commits, routing, scheduler grants and the task handle.

`from ffcore.worker import handler, Worker, WorkerConfig` is the public import; it resolves lazily so that the
modules of this package can import each other without pulling the run loop in first."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ffcore.worker.worker import Registry, Worker, WorkerConfig, handler

__all__ = ["Registry", "Worker", "WorkerConfig", "handler"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from ffcore.worker import worker

        return getattr(worker, name)
    raise AttributeError(f"module 'ffcore.worker' has no attribute {name!r}")
