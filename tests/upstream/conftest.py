"""A throwaway Valkey holding upstream FlowFabric's released v0.15.0 library (test data) and the scenario of
tests/upstream_scenario.py written through it; the dashboard pointed at it, in upstream mode."""

from __future__ import annotations

from tests.dashboard_fixtures import *  # noqa: F403 - users per role
from tests.upstream_scenario import *  # noqa: F403 - the deployment's fixtures
