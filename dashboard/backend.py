"""The dashboard process's engine backend, connected lazily from FF_SETTINGS."""

from __future__ import annotations

import threading
from typing import Any

from django.conf import settings
from django.http import HttpRequest

from ffcore.backend import Backend
from ffcore.upstream import UpstreamMode

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


def upstream_context(request: HttpRequest) -> dict[str, Any]:
    """Template context processor: `upstream_mode`, the upstream release the top bar names (None on our own
    library). A callable, so only pages that show the bar connect; an unreachable Valkey shows no badge
    (the page itself says what failed)."""

    def mode() -> UpstreamMode | None:
        try:
            return get_backend().upstream
        except Exception:  # noqa: BLE001 - the bar must never be what breaks a page
            return None

    return {"upstream_mode": mode}
