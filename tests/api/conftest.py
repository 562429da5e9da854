"""API fixtures: `client` calls with the API token (as `curl -H "Authorization: Bearer …"` would);
`anon_client` carries no credentials."""

from __future__ import annotations

import pytest
from django.test import Client as DjangoClient

from tests.dashboard_fixtures import *  # noqa: F403 - users and the seeded dataset

API_TOKEN = "test-api-token"


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch) -> DjangoClient:
    monkeypatch.setenv("FF_API_TOKEN", API_TOKEN)
    return DjangoClient(HTTP_AUTHORIZATION=f"Bearer {API_TOKEN}")


@pytest.fixture
def anon_client() -> DjangoClient:
    return DjangoClient()
