"""Read models for the dashboard pages (reads only; pipelined; never a keyspace scan)."""

from __future__ import annotations

from dataclasses import dataclass

from ffcore.backend import Backend
from ffcore.connection import display_url
from ffcore.library import CONTRACT_VERSION


@dataclass(frozen=True)
class SystemInfo:
    valkey_url: str
    server: str
    contract_version: str
    build_version: str
    flow_partitions: int
    budget_partitions: int
    quota_partitions: int


def system_info(backend: Backend) -> SystemInfo:
    from ffcore import functions as F

    contract = backend.call(F.version()).raw[0]
    build = backend.call(F.build_version()).raw[0]
    p = backend.settings.partitions
    return SystemInfo(
        valkey_url=display_url(backend.url), server=backend.server,
        contract_version=contract.decode() if isinstance(contract, bytes) else str(contract),
        build_version=build.decode() if isinstance(build, bytes) else str(build),
        flow_partitions=p.flow, budget_partitions=p.budget, quota_partitions=p.quota,
    )


__all__ = ["CONTRACT_VERSION", "SystemInfo", "system_info"]
