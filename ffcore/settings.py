"""Engine settings: one frozen dataclass built from the environment (`Settings.from_env()`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from .errors import ConfigError
from .partition import PartitionConfig


def _int(env: Mapping[str, str], name: str, default: int, *, minimum: int = 0, maximum: int = 2**53) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not an integer; set it to a whole number") from None
    if not minimum <= value <= maximum:
        raise ConfigError(f"{name}={value} is out of range; use a value in {minimum}..{maximum}")
    return value


def _flag(env: Mapping[str, str], name: str) -> bool:
    raw = env.get(name, "").strip().lower()
    if raw in ("", "0", "false", "no", "off"):
        return False
    if raw in ("1", "true", "yes", "on"):
        return True
    raise ConfigError(f"{name}={raw!r} is not a boolean; use 1/0")


def _choice(env: Mapping[str, str], name: str, choices: tuple[str, ...]) -> str:
    raw = env.get(name, "").strip().lower()
    if not raw:
        return choices[0]
    if raw not in choices:
        raise ConfigError(f"{name}={raw!r} is not one of {', '.join(choices)}")
    return raw


def _hex_secret(env: Mapping[str, str], name: str) -> str | None:
    raw = env.get(name, "").strip()
    if not raw:
        return None
    try:
        if len(raw) % 2:
            raise ValueError
        bytes.fromhex(raw)
    except ValueError:
        raise ConfigError(f"{name} must be an even-length hex string (e.g. `openssl rand -hex 32`)") from None
    return raw.lower()


@dataclass(frozen=True)
class ScannerSettings:
    """Scanner cadence and per-tick bounds (milliseconds / items)."""

    lease_expiry_interval_ms: int = 1500
    delayed_promoter_interval_ms: int = 750
    attempt_timeout_interval_ms: int = 2000
    execution_deadline_interval_ms: int = 5000
    suspension_timeout_interval_ms: int = 2000
    pending_waitpoint_interval_ms: int = 5000
    index_reconciler_interval_ms: int = 5000
    batch: int = 200


@dataclass(frozen=True)
class Settings:
    #: `valkey://`, `redis://`, `rediss://` or `valkey+cluster://`; None = start the embedded server.
    valkey_url: str | None = None
    partitions: PartitionConfig = field(default_factory=PartitionConfig)
    lease_ttl_ms: int = 30_000
    grant_ttl_ms: int = 5_000
    lease_history_grace_ms: int = 5_000
    waitpoint_hmac_secret: str | None = None
    waitpoint_hmac_grace_ms: int = 86_400_000
    #: Where the embedded Valkey keeps its data (AOF) and where `up` keeps runtime files.
    data_dir: str = "var"
    scanners: ScannerSettings = field(default_factory=ScannerSettings)
    #: Replace a `flowfabric` library that is not ours (another version or project) instead of refusing to
    #: start. Off by default: that library belongs to another deployment sharing this Valkey.
    replace_library: bool = False
    #: "default" (Valkey's asynchronous replication) or "replicated": every write batch waits for
    #: `wait_replicas` replicas, `wait_timeout_ms` at most (ffcore/durability.py).
    durability: str = "default"
    wait_replicas: int = 1
    wait_timeout_ms: int = 1000

    @property
    def replicated(self) -> bool:
        return self.durability == "replicated"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        e = os.environ if env is None else env
        url = e.get("FF_VALKEY_URL", "").strip() or None
        return cls(
            valkey_url=url,
            partitions=PartitionConfig(
                flow=_int(e, "FF_FLOW_PARTITIONS", 256, minimum=1, maximum=65535),
                budget=_int(e, "FF_BUDGET_PARTITIONS", 32, minimum=1, maximum=65535),
                quota=_int(e, "FF_QUOTA_PARTITIONS", 32, minimum=1, maximum=65535),
            ),
            lease_ttl_ms=_int(e, "FF_LEASE_TTL_MS", 30_000, minimum=100),
            grant_ttl_ms=_int(e, "FF_GRANT_TTL_MS", 5_000, minimum=100),
            lease_history_grace_ms=_int(e, "FF_LEASE_HISTORY_GRACE_MS", 5_000),
            waitpoint_hmac_secret=_hex_secret(e, "FF_WAITPOINT_HMAC_SECRET"),
            waitpoint_hmac_grace_ms=_int(e, "FF_WAITPOINT_HMAC_GRACE_MS", 86_400_000),
            data_dir=e.get("FF_DATA_DIR", "").strip() or "var",
            replace_library=_flag(e, "FF_REPLACE_LIBRARY"),
            durability=_choice(e, "FF_DURABILITY", ("default", "replicated")),
            wait_replicas=_int(e, "FF_WAIT_REPLICAS", 1, minimum=1, maximum=100),
            # Below the client's 10 s socket timeout, so a slow WAIT answers before the socket gives up.
            wait_timeout_ms=_int(e, "FF_WAIT_TIMEOUT_MS", 1000, minimum=1, maximum=9000),
            scanners=ScannerSettings(
                lease_expiry_interval_ms=_int(e, "FF_SCAN_LEASE_EXPIRY_MS", 1500, minimum=10),
                delayed_promoter_interval_ms=_int(e, "FF_SCAN_DELAYED_MS", 750, minimum=10),
                attempt_timeout_interval_ms=_int(e, "FF_SCAN_ATTEMPT_TIMEOUT_MS", 2000, minimum=10),
                execution_deadline_interval_ms=_int(e, "FF_SCAN_DEADLINE_MS", 5000, minimum=10),
                suspension_timeout_interval_ms=_int(e, "FF_SCAN_SUSPENSION_TIMEOUT_MS", 2000, minimum=10),
                pending_waitpoint_interval_ms=_int(e, "FF_SCAN_PENDING_WAITPOINT_MS", 5000, minimum=10),
                index_reconciler_interval_ms=_int(e, "FF_SCAN_INDEX_RECONCILER_MS", 5000, minimum=10),
                batch=_int(e, "FF_SCAN_BATCH", 200, minimum=1, maximum=10_000),
            ),
        )

    @classmethod
    def from_url(cls, url: str, **overrides: object) -> Settings:
        return replace(cls(valkey_url=url), **overrides)  # type: ignore[arg-type]

    def with_url(self, url: str) -> Settings:
        return replace(self, valkey_url=url)
