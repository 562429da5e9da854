"""Identifiers: execution ids `{fp:N}:<uuid>` and the plain-UUID ids of every other entity."""

from __future__ import annotations

import os
import re

from .errors import InvalidId
from .partition import flow_tag

_EID = re.compile(r"^\{fp:(\d{1,5})\}:([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\Z")
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\Z")


def new_uuid() -> str:
    """A random (version 4) UUID, lowercase; built directly (uuid.uuid4() costs ~4x as much per call)."""
    return _uuid_of(bytearray(os.urandom(16)))


def new_uuid_pairs(n: int) -> list[tuple[str, str]]:
    """`n` pairs of new UUIDs (a claim's lease and attempt ids) from one read of the random source."""
    raw = os.urandom(32 * n)
    return [(_uuid_of(bytearray(raw[i:i + 16])), _uuid_of(bytearray(raw[i + 16:i + 32]))) for i in range(0, 32 * n, 32)]


def _uuid_of(b: bytearray) -> str:
    b[6] = (b[6] & 0x0F) | 0x40
    b[8] = (b[8] & 0x3F) | 0x80
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


class ExecutionId(str):
    """A parsed execution id; `partition` is read from its own `{fp:N}` prefix, never hashed."""

    partition_index: int
    uuid: str

    def __new__(cls, value: str) -> ExecutionId:
        if not isinstance(value, str):
            raise InvalidId(f"execution id must be a string, got {value!r}")
        m = _EID.match(value)
        if m is None:
            raise InvalidId(f"invalid execution id {value!r}: expected '{{fp:N}}:<lowercase uuid>'")
        n = int(m.group(1))
        if n > 0xFFFF:
            raise InvalidId(f"invalid execution id {value!r}: partition {n} is not a u16")
        obj = super().__new__(cls, value)
        obj.partition_index = n
        obj.uuid = m.group(2)
        return obj

    @property
    def tag(self) -> str:
        return flow_tag(self.partition_index)

    @classmethod
    def mint(cls, partition: int, value: str | None = None) -> ExecutionId:
        return cls(f"{flow_tag(partition)}:{value or new_uuid()}")


def parse_execution_id(value: str) -> ExecutionId:
    return ExecutionId(value)


def parse_uuid(value: str, what: str = "id") -> str:
    """Validate a lowercase hyphenated UUID (flow, budget, quota, waitpoint, signal, edge, attempt, lease)."""
    if not isinstance(value, str) or _UUID.match(value) is None:
        raise InvalidId(f"invalid {what} {value!r}: expected a lowercase hyphenated UUID")
    return value


def parse_flow_id(value: str) -> str:
    return parse_uuid(value, "flow id")


def parse_budget_id(value: str) -> str:
    return parse_uuid(value, "budget id")


def parse_quota_id(value: str) -> str:
    return parse_uuid(value, "quota policy id")


def parse_waitpoint_id(value: str) -> str:
    return parse_uuid(value, "waitpoint id")


def parse_signal_id(value: str) -> str:
    return parse_uuid(value, "signal id")


def parse_edge_id(value: str) -> str:
    return parse_uuid(value, "edge id")


def parse_attempt_id(value: str) -> str:
    return parse_uuid(value, "attempt id")


def parse_lease_id(value: str) -> str:
    return parse_uuid(value, "lease id")
