from tests.dashboard_fixtures import *  # noqa: F403 - users and the seeded dataset
