"""The dashboard process's engine backend, connected lazily from FF_SETTINGS."""

from __future__ import annotations

import threading

from django.conf import settings

from ffcore.backend import Backend

from .metrics import flush_into, observe_fcall

_lock = threading.Lock()
_backend: Backend | None = None


def get_backend() -> Backend:
    global _backend
    if _backend is None:
        with _lock:
            if _backend is None:
                _backend = Backend.connect(settings.FF_SETTINGS)
                _backend.observer = observe_fcall
                flush_into(_backend)  # HTTP request counts go to Valkey through it
    return _backend


def reset_backend() -> None:
    """Forget the cached backend (tests point the dashboard at their own server)."""
    global _backend
    with _lock:
        if _backend is not None:
            _backend.close()
        _backend = None
        flush_into(None)
