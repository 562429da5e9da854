"""Fixtures shared by the engine tests of this folder."""

from __future__ import annotations

import pytest

from ffcore.backend import Backend
from tests.ffcore.suspension_support import with_secrets


@pytest.fixture
def hb(backend: Backend) -> Backend:
    """The flushed backend with the waitpoint HMAC secret installed (suspension and signal tests)."""
    return with_secrets(backend)
