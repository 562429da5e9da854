import pytest

from ffcore.errors import ConfigError
from ffcore.settings import Settings


def test_defaults_without_environment():
    s = Settings.from_env({})
    assert s.valkey_url is None
    assert (s.partitions.flow, s.partitions.budget, s.partitions.quota) == (256, 32, 32)
    assert s.lease_ttl_ms == 30_000


def test_environment_overrides():
    s = Settings.from_env({"FF_VALKEY_URL": "valkey://h:1/0", "FF_FLOW_PARTITIONS": "64",
                           "FF_LEASE_TTL_MS": "5000", "FF_WAITPOINT_HMAC_SECRET": "00AA"})
    assert s.valkey_url == "valkey://h:1/0"
    assert s.partitions.flow == 64
    assert s.lease_ttl_ms == 5000
    assert s.waitpoint_hmac_secret == "00aa"


@pytest.mark.parametrize(("name", "value"), [("FF_FLOW_PARTITIONS", "abc"), ("FF_FLOW_PARTITIONS", "0"),
                                             ("FF_WAITPOINT_HMAC_SECRET", "abc"), ("FF_LEASE_TTL_MS", "-1")])
def test_bad_values_name_the_variable(name, value):
    with pytest.raises(ConfigError, match=name):
        Settings.from_env({name: value})


def test_settings_are_frozen():
    s = Settings.from_env({})
    with pytest.raises(AttributeError):
        s.lease_ttl_ms = 1  # type: ignore[misc]
