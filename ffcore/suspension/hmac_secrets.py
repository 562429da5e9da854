"""Waitpoint HMAC secrets (contract §8): boot install, rotation with a grace window, listing kids.

The keystore `ff:sec:{fp:N}:waitpoint_hmac` is replicated on every flow partition because the Lua
validates tokens inside the execution's slot. Boot never overwrites a stored secret (server.md §1.4):
changing `FF_WAITPOINT_HMAC_SECRET` and restarting rotates nothing — rotation is `rotate()`.
"""

from __future__ import annotations

import logging
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from ffcore import functions as F
from ffcore import keys, secret_files
from ffcore.backend import Backend
from ffcore.errors import ConfigError, ScriptError
from ffcore.keys import PartitionKeys
from ffcore.reads import text

log = logging.getLogger("ffcore.hmac")

#: The kid boot installs when a partition has none.
FIRST_KID = "k1"
#: Name of the generated secret kept under the data dir (embedded Valkey only).
SECRET_FILE = "waitpoint_hmac_secret"
#: How long one partition's rotation lock is held at most (ms); covers a crashed rotator.
ROTATE_LOCK_TTL_MS = 10_000


def validate_kid(kid: str) -> str:
    if not kid or ":" in kid or any(ord(c) <= 0x20 or ord(c) == 0x7F for c in kid):
        raise ConfigError(f"kid {kid!r} must be non-empty, without ':' (the token delimiter), spaces or control "
                          "characters")
    return kid


def validate_secret(secret_hex: str) -> str:
    s = secret_hex.strip()
    try:
        if not s or len(s) % 2:
            raise ValueError
        bytes.fromhex(s)
    except ValueError:
        raise ConfigError("the waitpoint HMAC secret must be an even-length hex string "
                          "(e.g. `openssl rand -hex 32`)") from None
    return s.lower()


def generate_secret() -> str:
    """32 random bytes as hex."""
    return secrets.token_hex(32)


def persisted_secret(data_dir: str | os.PathLike[str]) -> str:
    """The secret kept under `data_dir` for the embedded server, generated (mode 0600) on first use."""
    return validate_secret(secret_files.read_or_create(Path(data_dir) / SECRET_FILE, generate_secret).value)


@dataclass
class InstallReport:
    installed: int = 0
    repaired: int = 0
    matched: int = 0
    #: Partitions whose stored secret differs from the configured one (the stored one is kept).
    mismatched: int = 0

    @property
    def summary(self) -> str:
        parts = [f"{n} {what}" for n, what in ((self.installed, "installed"), (self.repaired, "repaired"),
                                               (self.matched, "already installed"),
                                               (self.mismatched, "kept (stored secret differs)")) if n]
        return ", ".join(parts) or "no partitions"


def install(backend: Backend, secret_hex: str, kid: str = FIRST_KID) -> InstallReport:
    """Install `secret_hex` as kid `kid` on every partition that has no current kid (two round trips)."""
    secret = validate_secret(secret_hex)
    parts = [PartitionKeys(n) for n in range(backend.settings.partitions.flow)]
    pipe = backend.client.pipeline(transaction=False)
    for ix in parts:
        pipe.hget(ix.hmac_secrets, "current_kid")
    current = [text(v) for v in pipe.execute()]
    pipe = backend.client.pipeline(transaction=False)
    for ix, cur in zip(parts, current, strict=True):
        if cur:
            pipe.hget(ix.hmac_secrets, f"secret:{cur}")
    stored = iter([text(v) for v in pipe.execute()] if any(current) else [])
    report = InstallReport()
    pipe = backend.client.pipeline(transaction=False)
    for ix, cur in zip(parts, current, strict=True):
        if not cur:
            # One multi-field HSET, so a crash never leaves a current kid without its secret.
            pipe.hset(ix.hmac_secrets, mapping={"current_kid": validate_kid(kid), f"secret:{kid}": secret})
            report.installed += 1
            continue
        value = next(stored)
        if not value:
            pipe.hset(ix.hmac_secrets, f"secret:{cur}", secret)  # torn write: repair
            report.repaired += 1
        elif value.lower() == secret:
            report.matched += 1
        else:
            report.mismatched += 1
    pipe.execute()
    if report.repaired:
        log.warning("waitpoint HMAC secret repaired on %d partitions (current kid without its secret)", report.repaired)
    if report.mismatched:
        log.warning("the stored waitpoint HMAC secret differs from the configured one on %d partitions; the stored "
                    "one is kept. Rotate with `manage.py ffrotatesecret` to change it.", report.mismatched)
    return report


def installed_everywhere(backend: Backend) -> bool:
    pipe = backend.client.pipeline(transaction=False)
    for n in range(backend.settings.partitions.flow):
        pipe.hexists(PartitionKeys(n).hmac_secrets, "current_kid")
    return all(pipe.execute())


def ensure_installed(backend: Backend) -> InstallReport | None:
    """Boot step of every engine process: install the configured secret, or refuse to start without one.

    Without `FF_WAITPOINT_HMAC_SECRET` a process may still start when every partition already holds a
    secret (e.g. installed by `up` or another replica); returns None then.
    """
    secret = backend.settings.waitpoint_hmac_secret
    if secret:
        return install(backend, secret)
    if installed_everywhere(backend):
        return None
    raise ConfigError("FF_WAITPOINT_HMAC_SECRET is not set and no waitpoint HMAC secret is installed; set it to an "
                      "even-length hex string (e.g. `openssl rand -hex 32`)")


@dataclass
class RotationReport:
    new_kid: str
    rotated: list[int] = field(default_factory=list)
    #: Partitions already on `new_kid` with the same secret (a re-run converges).
    unchanged: list[int] = field(default_factory=list)
    #: Partition -> error code (`rotation_conflict`: the kid exists there with a different secret).
    failed: dict[int, str] = field(default_factory=dict)
    #: Partitions another rotation was busy with; run again to converge.
    in_progress: list[int] = field(default_factory=list)
    #: Kids demoted by this rotation (they keep validating until their grace expiry).
    previous_kids: set[str] = field(default_factory=set)
    expired_kids_removed: int = 0

    @property
    def ok(self) -> bool:
        return not self.failed and not self.in_progress


def rotate(backend: Backend, new_kid: str, new_secret_hex: str, grace_ms: int | None = None) -> RotationReport:
    """Make `new_kid` the minting kid on every partition; tokens of the previous kid stay valid for
    `grace_ms` (default `FF_WAITPOINT_HMAC_GRACE_MS`). Per-partition locks keep concurrent rotators from
    interleaving; partitions locked by another rotator are reported `in_progress`."""
    kid, secret = validate_kid(new_kid), validate_secret(new_secret_hex)
    grace = backend.settings.waitpoint_hmac_grace_ms if grace_ms is None else grace_ms
    if not 0 <= grace <= 2**53 - 1:
        raise ConfigError("grace_ms must be an integer in 0..2^53-1")
    n = backend.settings.partitions.flow
    token = secrets.token_hex(8)
    pipe = backend.client.pipeline(transaction=False)
    for i in range(n):
        pipe.set(keys.rotate_lock(i), token, nx=True, px=ROTATE_LOCK_TTL_MS)
    locked = [i for i, ok in enumerate(pipe.execute()) if ok]
    report = RotationReport(kid, in_progress=sorted(set(range(n)) - set(locked)))
    try:
        replies = backend.call_many([F.rotate_waitpoint_hmac_secret(PartitionKeys(i), new_kid=kid,
                                                                   new_secret_hex=secret, grace_ms=grace)
                                     for i in locked])
        for i, r in zip(locked, replies, strict=True):
            if isinstance(r, ScriptError):
                report.failed[i] = r.code
            elif r[0] == "rotated":
                report.rotated.append(i)
                if r[1]:
                    report.previous_kids.add(r[1])
                report.expired_kids_removed += int(r[3] or 0)
            else:
                report.unchanged.append(i)
    finally:
        pipe = backend.client.pipeline(transaction=False)
        for i in locked:
            # A lock that outlived its TTL may belong to another rotator by now; deleting it only weakens that
            # rotator's exclusion (each FCALL is atomic on its partition), so no compare-and-delete.
            pipe.delete(keys.rotate_lock(i))
        pipe.execute()
    return report


@dataclass(frozen=True)
class KidInfo:
    current_kid: str
    #: Demoted kids still accepted, with their grace expiry (ms).
    grace: dict[str, int]


def list_kids(backend: Backend, partition: int = 0) -> KidInfo:
    reply = backend.call(F.list_waitpoint_hmac_kids(PartitionKeys(partition)))
    current, count, rest = reply[0], int(reply[1] or 0), reply.fields[2:]
    return KidInfo(current, {rest[2 * i]: int(rest[2 * i + 1]) for i in range(count)})
