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


@functools.lru_cache(maxsize=16)
def _by_slot(count: int) -> tuple[int, ...]:
    """Partition indexes ordered by the cluster slot of their hash tag `{fp:N}`."""
    return tuple(sorted(range(count), key=lambda n: crc16(f"fp:{n}".encode()) % 16384))


@functools.lru_cache(maxsize=4096)
def spread_partitions(lane: str, spread: int, count: int = DEFAULT_FLOW_PARTITIONS) -> tuple[int, ...]:
    """The partitions of a lane spread over `spread` of them: the lane's own partition, then the partitions
    ⌊count / spread⌋ apart from it in slot order, so that their slots are spread evenly over the slot space
    and fall on different primaries of a cluster whose primaries own even slot ranges."""
    if not 1 <= spread <= count:
        raise ValueError(f"spread must be between 1 and {count}")
    order = _by_slot(count)
    at, step = order.index(lane_partition(lane, count)), count // spread
    return tuple(order[(at + j * step) % count] for j in range(spread))


@functools.lru_cache(maxsize=65536)
def flow_tag(n: int) -> str:
    return f"{{fp:{n}}}"


def budget_tag(m: int) -> str:
    return f"{{b:{m}}}"


def quota_tag(k: int) -> str:
    return f"{{q:{k}}}"
