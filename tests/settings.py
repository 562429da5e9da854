"""Test settings: production's, plus the host name Django's test client and Channels' communicator send."""

from dashboard.settings import *  # noqa: F403

ALLOWED_HOSTS = [*ALLOWED_HOSTS, "testserver"]  # noqa: F405
