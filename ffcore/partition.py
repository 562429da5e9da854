"""Partitioning (contract §2): CRC-16/XMODEM over raw UUID bytes or the lane name, hash tags."""

from __future__ import annotations

import functools
import uuid
from dataclasses import dataclass

#: Default partition counts, locked in `ff:config:partitions` at first boot.
DEFAULT_FLOW_PARTITIONS = 256
DEFAULT_BUDGET_PARTITIONS = 32
DEFAULT_QUOTA_PARTITIONS = 32


def _table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)
        table.append(crc & 0xFFFF)
    return table


_TABLE = _table()


def crc16(data: bytes) -> int:
    """CRC-16/XMODEM (poly 0x1021, init 0, no reflection) — the same CRC Valkey Cluster slots use."""
    crc = 0
    for b in data:
        crc = ((crc << 8) & 0xFFFF) ^ _TABLE[((crc >> 8) ^ b) & 0xFF]
    return crc


@dataclass(frozen=True)
class PartitionConfig:
    flow: int = DEFAULT_FLOW_PARTITIONS
    budget: int = DEFAULT_BUDGET_PARTITIONS
    quota: int = DEFAULT_QUOTA_PARTITIONS

    def as_hash(self) -> dict[str, str]:
        return {
            "num_flow_partitions": str(self.flow),
            "num_budget_partitions": str(self.budget),
            "num_quota_partitions": str(self.quota),
        }


def _uuid_bytes(value: str | uuid.UUID) -> bytes:
    return (value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))).bytes


def flow_partition(flow_id: str | uuid.UUID, count: int = DEFAULT_FLOW_PARTITIONS) -> int:
    return crc16(_uuid_bytes(flow_id)) % count


def budget_partition(budget_id: str | uuid.UUID, count: int = DEFAULT_BUDGET_PARTITIONS) -> int:
    return crc16(_uuid_bytes(budget_id)) % count


def quota_partition(quota_id: str | uuid.UUID, count: int = DEFAULT_QUOTA_PARTITIONS) -> int:
    return crc16(_uuid_bytes(quota_id)) % count


@functools.lru_cache(maxsize=4096)
def lane_partition(lane: str, count: int = DEFAULT_FLOW_PARTITIONS) -> int:
    """Partition of a solo execution: crc16 over the lane name's UTF-8 bytes."""
    return crc16(lane.encode("utf-8")) % count


@functools.lru_cache(maxsize=65536)
def flow_tag(n: int) -> str:
    return f"{{fp:{n}}}"


def budget_tag(m: int) -> str:
    return f"{{b:{m}}}"


def quota_tag(k: int) -> str:
    return f"{{q:{k}}}"
