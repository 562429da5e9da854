import pytest

from ffcore.errors import InvalidId
from ffcore.ids import ExecutionId, parse_flow_id, parse_lease_id


def test_it_parses_the_partition_from_the_id():
    eid = ExecutionId("{fp:193}:6ba7b810-9dad-11d1-80b4-00c04fd430c8")
    assert eid.partition_index == 193
    assert eid.uuid == "6ba7b810-9dad-11d1-80b4-00c04fd430c8"
    assert eid.tag == "{fp:193}"


@pytest.mark.parametrize("bad", [
    "6ba7b810-9dad-11d1-80b4-00c04fd430c8",            # no tag
    "{p:1}:6ba7b810-9dad-11d1-80b4-00c04fd430c8",      # old tag prefix
    "{fp:70000}:6ba7b810-9dad-11d1-80b4-00c04fd430c8",  # not a u16
    "{fp:1}:not-a-uuid",
    "{fp:1}:6BA7B810-9DAD-11D1-80B4-00C04FD430C8",      # upper case
    "",
])
def test_it_rejects_bad_execution_ids_naming_the_value(bad):
    with pytest.raises(InvalidId) as exc:
        ExecutionId(bad)
    assert repr(bad) in str(exc.value)


def test_other_ids_are_lowercase_uuids():
    assert parse_flow_id("550e8400-e29b-41d4-a716-446655440000") == "550e8400-e29b-41d4-a716-446655440000"
    with pytest.raises(InvalidId, match="lease id 'nope'"):
        parse_lease_id("nope")


def test_minted_ids_round_trip():
    eid = ExecutionId.mint(7)
    assert ExecutionId(str(eid)).partition_index == 7
