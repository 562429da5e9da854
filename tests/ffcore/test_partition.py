"""Partitioning pins the worked examples of contract §2.3."""

import pytest

from ffcore.ids import ExecutionId
from ffcore.keys import ExecKeys
from ffcore.partition import budget_partition, crc16, flow_partition, lane_partition, quota_partition


def test_crc16_xmodem_check_value():
    assert crc16(b"123456789") == 0x31C3


@pytest.mark.parametrize(
    ("fn", "value", "crc_input", "expected"),
    [
        (flow_partition, "550e8400-e29b-41d4-a716-446655440000", bytes.fromhex("550e8400e29b41d4a716446655440000"), 24),
        (lane_partition, "default", b"default", 86),
        (lane_partition, "workers-a", b"workers-a", 193),
        (budget_partition, "550e8400-e29b-41d4-a716-446655440000", None, 24),
        (quota_partition, "6ba7b810-9dad-11d1-80b4-00c04fd430c8", None, 13),
        (flow_partition, "00000000-0000-0000-0000-000000000000", None, 0),
    ],
)
def test_worked_examples(fn, value, crc_input, expected):
    assert fn(value) == expected
    if crc_input is not None:
        assert crc16(crc_input) % 256 == expected


def test_it_hashes_uuid_bytes_not_text():
    assert crc16(b"550e8400-e29b-41d4-a716-446655440000") == 0xA206
    assert flow_partition("550e8400-e29b-41d4-a716-446655440000") != 0xA206 % 256


def test_crc_values_of_the_examples():
    assert crc16(bytes.fromhex("550e8400e29b41d4a716446655440000")) == 0x9018
    assert crc16(b"default") == 0xD656
    assert crc16(b"workers-a") == 0x2EC1
    assert crc16(bytes.fromhex("6ba7b8109dad11d180b400c04fd430c8")) == 0xF34D


def test_execution_minted_for_a_flow_lands_on_the_flow_partition():
    eid = ExecutionId.mint(flow_partition("550e8400-e29b-41d4-a716-446655440000"),
                           "6ba7b810-9dad-11d1-80b4-00c04fd430c8")
    assert eid == "{fp:24}:6ba7b810-9dad-11d1-80b4-00c04fd430c8"
    assert ExecKeys(eid).core == "ff:exec:{fp:24}:{fp:24}:6ba7b810-9dad-11d1-80b4-00c04fd430c8:core"
    # Valkey slots on the first {...}: crc16("fp:24") mod 16384.
    assert crc16(b"fp:24") % 16384 == 360
