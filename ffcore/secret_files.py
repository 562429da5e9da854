"""Private files under the data dir: the dir is 0700, every secret and data file 0600.

Every secret a process persists (Django's secret key, the waitpoint HMAC secret, the embedded Valkey's
password, the API token) is read or created here, so they share one rule: created atomically with mode
0600 (never world-readable, not even for an instant), the first writer wins when two processes start
at once, and files left looser by older versions are tightened when read.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from .errors import ConfigError

DIR_MODE = 0o700
FILE_MODE = 0o600
#: Names under the data dir (FF_DATA_DIR).
VALKEY_PASSWORD_FILE = "valkey_password"
API_TOKEN_FILE = "api_token"


class Secret(NamedTuple):
    value: str
    #: True when this call generated and wrote it (callers print a new secret once, then only its path).
    created: bool


def private_dir(path: str | os.PathLike[str]) -> Path:
    """Create `path` (and missing parents) mode 0700, or tighten it to 0700 when it is ours."""
    p = Path(path)
    p.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    _tighten(p, DIR_MODE)
    return p


def private_file(path: str | os.PathLike[str]) -> Path:
    """Create an empty `path` mode 0600 (e.g. an SQLite database before its first connection: SQLite keeps
    the mode, and gives its journal the same) or tighten an existing one."""
    p = Path(path)
    private_dir(p.parent)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE))
    _tighten(p, FILE_MODE)
    return p


def tighten_tree(path: str | os.PathLike[str]) -> None:
    """Directories 0700 and files 0600 under `path` (files written before these modes were the rule)."""
    root = Path(path)
    if not root.is_dir():
        return
    _tighten(root, DIR_MODE)
    for base, dirs, files in os.walk(root):
        for d in dirs:
            _tighten(Path(base, d), DIR_MODE)
        for f in files:
            _tighten(Path(base, f), FILE_MODE)


def read(path: str | os.PathLike[str]) -> str | None:
    """The secret in `path` (stripped; tightened to 0600 if it was looser), or None when there is none."""
    p = Path(path)
    try:
        raw = p.read_text()
    except FileNotFoundError:
        return None
    _tighten(p, FILE_MODE)
    value = raw.strip()
    if not value:
        raise ConfigError(f"{p} is empty; delete it to have a new secret generated")
    return value


def read_or_create(path: str | os.PathLike[str], generate: Callable[[], str] | None = None) -> Secret:
    """The secret in `path` (stripped), or a new one from `generate` (default: 32 random bytes, URL-safe)
    written mode 0600."""
    p = Path(path)
    value = read(p)
    if value is not None:
        return Secret(value, False)
    private_dir(p.parent)
    value = (generate or _token)()
    # Written whole under a temporary name, then linked into place: readers never see a partial file, and
    # of two processes creating it at once the first link wins and the other adopts its value.
    tmp = p.with_name(f".{p.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(value + "\n")
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, p)
        except FileExistsError:
            existing = read(p)
            if existing is None:  # pragma: no cover - deleted again between the link and the read
                raise
            return Secret(existing, False)
    finally:
        tmp.unlink(missing_ok=True)
    return Secret(value, True)


def valkey_password_file(data_dir: str | os.PathLike[str]) -> Path:
    """Where the embedded Valkey's password lives (`<data_dir>/valkey_password`)."""
    return Path(data_dir) / VALKEY_PASSWORD_FILE


def api_token_file(data_dir: str | os.PathLike[str]) -> Path:
    """Where `up` keeps the API token it generates when FF_API_TOKEN is not set (`<data_dir>/api_token`)."""
    return Path(data_dir) / API_TOKEN_FILE


def _token() -> str:
    return secrets.token_urlsafe(32)


def _tighten(p: Path, mode: int) -> None:
    """chmod `p` to `mode` when it allows more and belongs to us; a shared dir (another owner, or sticky
    like /tmp) is left as it is."""
    st = p.stat()
    if st.st_mode & 0o777 & ~mode and st.st_uid == os.getuid() and not st.st_mode & stat.S_ISVTX:
        p.chmod(mode)
