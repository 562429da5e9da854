"""The `flowfabric` function library: joining `lua/*.lua`, loading, verifying, self-healing.

Files are joined in the explicit order of `lua/ORDER` behind `#!lua name=flowfabric`, each preceded by
a blank line and `-- source: lua/<file>` (the contract's §1 layout). `ff_version` must keep returning
the contract version "6"; `ff_build_version` returns ours, derived from the joined source, so a
changed library is reloaded even though the contract version did not change.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from functools import lru_cache
from pathlib import Path
from typing import Any

import redis

from .errors import LibraryError

CONTRACT_VERSION = "6"
LIBRARY_NAME = "flowfabric"
LUA_DIR = Path(__file__).resolve().parent.parent / "lua"
_BUILD_PLACEHOLDER = "ffpy-0.1.0"


def file_order(lua_dir: Path = LUA_DIR) -> list[str]:
    lines = (lua_dir / "ORDER").read_text().splitlines()
    return [ln.strip() for ln in lines if ln.strip() and not ln.strip().startswith("#")]


@lru_cache(maxsize=4)
def _source(lua_dir: Path) -> tuple[str, str]:
    parts = [f"#!lua name={LIBRARY_NAME}\n"]
    for name in file_order(lua_dir):
        body = (lua_dir / name).read_text()
        body = "\n".join(ln for ln in body.splitlines() if not ln.startswith("#!lua"))
        parts.append(f"\n-- source: lua/{name}\n{body}\n")
    joined = "".join(parts)
    build = f"{_BUILD_PLACEHOLDER}+{hashlib.sha1(joined.encode()).hexdigest()[:12]}"
    return joined.replace(f"'{_BUILD_PLACEHOLDER}'", f"'{build}'", 1), build


def library_source(lua_dir: Path = LUA_DIR) -> str:
    return _source(lua_dir)[0]


def build_version(lua_dir: Path = LUA_DIR) -> str:
    return _source(lua_dir)[1]


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _loaded_versions(client: Any) -> tuple[str | None, str | None]:
    try:
        contract = _text(client.fcall("ff_version", 0))
    except redis.ResponseError:
        return None, None
    try:
        build = _text(client.fcall("ff_build_version", 0))
    except redis.ResponseError:
        build = None
    return contract, build


def _primaries(client: Any) -> list[Any]:
    """Every primary to load on: the client itself, or each primary's node client in a cluster."""
    get_primaries = getattr(client, "get_primaries", None)
    if get_primaries is None:
        return [client]
    return [client.get_redis_connection(node) for node in get_primaries()]


def ensure_loaded(client: Any, *, force: bool = False, lua_dir: Path = LUA_DIR) -> str:
    """Load the library where it is missing or differs; verify; return the build version."""
    source, build = _source(lua_dir)
    for node in _primaries(client):
        if not force and _loaded_versions(node) == (CONTRACT_VERSION, build):
            continue
        for attempt in range(3):
            try:
                node.function_load(source, replace=True)
                break
            except redis.ResponseError as e:
                text = str(e)
                permanent = any(s in text for s in ("Error compiling", "syntax error", "ERR Error"))
                if permanent or attempt == 2:
                    raise LibraryError(f"FUNCTION LOAD of {LIBRARY_NAME} failed: {text}") from None
                time.sleep(1)
        got = _loaded_versions(node)
        if got != (CONTRACT_VERSION, build):
            raise LibraryError(f"library version mismatch after load: got {got}, want {(CONTRACT_VERSION, build)}")
    return build


_MISSING_MARKERS = ("function not loaded", "no matching function", "function not found", "noscript")


def is_missing_function_error(err: Exception) -> bool:
    text = str(err).lower()
    return any(m in text for m in _MISSING_MARKERS)


def main(argv: list[str] | None = None) -> int:
    """`python -m ffcore.library [--url URL]`: load the library (used by the conformance kit). Without --url:
    FF_VALKEY_URL, else the embedded server `up` runs on FF_DATA_DIR (its password read from there too)."""
    from .connection import make_client
    from .embedded import resolve_settings
    from .settings import Settings

    ap = argparse.ArgumentParser(description="Load the flowfabric function library into Valkey")
    ap.add_argument("--url", help="default: FF_VALKEY_URL, else the embedded server `manage.py up` runs")
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--print", action="store_true", help="print the joined library source and exit")
    ns = ap.parse_args(argv)
    if ns.print:
        sys.stdout.write(library_source())
        return 0
    env = Settings.from_env()
    url = resolve_settings(env.with_url(ns.url) if ns.url else env).valkey_url
    if not url:
        print("error: no Valkey URL: pass --url, set FF_VALKEY_URL or start `manage.py up`", file=sys.stderr)
        return 1
    client = make_client(url)
    try:
        print(ensure_loaded(client, force=ns.force))
    except LibraryError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
