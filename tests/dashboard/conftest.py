from tests.dashboard_fixtures import *  # noqa: F403 - shared fixtures
