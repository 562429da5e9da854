"""The `flowfabric` function library: joining `lua/*.lua`, loading, verifying, self-healing.

Files are joined in the explicit order of `lua/ORDER` behind `#!lua name=flowfabric`, each preceded by
a blank line and `-- source: lua/<file>` (the contract's §1 layout). `ff_version` must keep returning
the contract version "6"; `ff_build_version` returns ours, derived from the joined source, so a
changed library is reloaded even though the contract version did not change.

The loader never clobbers somebody else's library: it replaces a loaded `flowfabric` only when that is
ours (another build: `ff_build_version` "ffpy-…") or upstream v0.2.0's (contract "6", exactly the 47
contract functions — ours is call-compatible with it). Anything else (upstream's later versions answer
another `ff_version`, e.g. "34") is refused with `ForeignLibrary` unless `replace_foreign` is given.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import redis

from .errors import LibraryError

CONTRACT_VERSION = "6"
LIBRARY_NAME = "flowfabric"


def find_lua_dir() -> Path:
    """The library's Lua sources: `ffcore/lua/` inside an installed wheel (setup.py maps the repository's
    `lua/` there), else the checkout's top-level `lua/` (editable installs, running from the repository)."""
    package = Path(__file__).resolve().parent
    installed = package / "lua"
    return installed if (installed / "ORDER").is_file() else package.parent / "lua"


LUA_DIR = find_lua_dir()
_BUILD_PLACEHOLDER = "ffpy-0.1.0"
#: What every build of ours answers from `ff_build_version` ("ffpy-<version>+<source hash>").
_OUR_BUILD_PREFIX = "ffpy-"

#: Upstream FlowFabric v0.2.0's functions (fcall-contract §5): a library with exactly these and
#: `ff_version` "6" is the contract itself, which ours may replace.
UPSTREAM_V020_FUNCTIONS = frozenset({
    "ff_version", "ff_create_execution", "ff_claim_execution", "ff_complete_execution", "ff_cancel_execution",
    "ff_delay_execution", "ff_move_to_waiting_children", "ff_fail_execution", "ff_reclaim_execution",
    "ff_expire_execution", "ff_renew_lease", "ff_mark_lease_expired_if_due", "ff_revoke_lease",
    "ff_issue_claim_grant", "ff_change_priority", "ff_update_progress", "ff_promote_delayed",
    "ff_issue_reclaim_grant", "ff_suspend_execution", "ff_resume_execution", "ff_create_pending_waitpoint",
    "ff_expire_suspension", "ff_close_waitpoint", "ff_rotate_waitpoint_hmac_secret", "ff_list_waitpoint_hmac_kids",
    "ff_deliver_signal", "ff_buffer_signal_for_pending_waitpoint", "ff_claim_resumed_execution", "ff_append_frame",
    "ff_read_attempt_stream", "ff_create_budget", "ff_report_usage_and_check", "ff_reset_budget",
    "ff_unblock_execution", "ff_block_execution_for_admission", "ff_create_quota_policy",
    "ff_check_admission_and_record", "ff_release_admission", "ff_create_flow", "ff_add_execution_to_flow",
    "ff_cancel_flow", "ff_stage_dependency_edge", "ff_apply_dependency_to_child", "ff_resolve_dependency",
    "ff_evaluate_flow_eligibility", "ff_promote_blocked_to_eligible", "ff_replay_execution",
})


class ForeignLibrary(LibraryError):
    """A `flowfabric` library that is neither ours nor upstream v0.2.0's is loaded; it was left in place."""


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


def loaded_versions(client: Any) -> tuple[str | None, str | None]:
    """(`ff_version`, `ff_build_version`) of the loaded library; None where a function is missing."""
    try:
        contract = _text(client.fcall("ff_version", 0))
    except redis.ResponseError:
        return None, None
    try:
        build = _text(client.fcall("ff_build_version", 0))
    except redis.ResponseError:
        build = None
    return contract, build


def _function_names(client: Any) -> set[str] | None:
    """The functions of the loaded `flowfabric` library, or None when none is loaded."""
    libs = client.execute_command("FUNCTION", "LIST", "LIBRARYNAME", LIBRARY_NAME)
    for lib in libs or []:
        fields = _pairs(lib)
        if _text(fields.get("library_name", b"")) != LIBRARY_NAME:
            continue  # LIBRARYNAME is a pattern: flowfabric_x matches too
        return {_text(_pairs(fn).get("name", b"")) for fn in fields.get("functions") or []}
    return None


def _pairs(v: Any) -> dict[str, Any]:
    """A RESP3 map or a RESP2 flat list of alternating names and values, as a dict."""
    if isinstance(v, dict):
        return {_text(k): x for k, x in v.items()}
    return {_text(v[i]): v[i + 1] for i in range(0, len(v) - 1, 2)}


#: Upstream releases told apart by `ff_version` and their function count (../shared/upstream's README):
#: v0.13.0 answers "31" with 57 functions, v0.14.0-v0.15.0 "34" with 59.
UPSTREAM_RELEASES: dict[tuple[str, int], str] = {("31", 57): "v0.13", ("34", 59): "v0.14-v0.15"}


@dataclass(frozen=True)
class Detected:
    """What a node's `flowfabric` library is, read without changing anything (FUNCTION LIST, ff_version)."""

    #: "none", "ours", "upstream-v0.2.0", "upstream-v0.13", "upstream-v0.14-v0.15" or "foreign".
    kind: str
    contract: str | None = None
    build: str | None = None
    functions: int = 0

    @property
    def is_upstream(self) -> bool:
        return self.kind.startswith("upstream-")

    @property
    def replaceable(self) -> bool:
        """Ours to (re)load: nothing there, a build of ours, or the v0.2.0 contract ours is compatible with."""
        return self.kind in ("none", "ours", "upstream-v0.2.0")

    def describe(self) -> str:
        what = f"ff_version {self.contract!r}" if self.contract is not None else "no ff_version"
        if self.build is not None:
            what += f", build {self.build!r}"
        return f"{what}, {self.functions} functions"


def detect(node: Any) -> Detected:
    """Classify the node's loaded `flowfabric` library; read-only (never loads, never replaces)."""
    contract, build = loaded_versions(node)
    names = _function_names(node)
    if names is None:
        return Detected("none")
    n = len(names)
    if build is not None and build.startswith(_OUR_BUILD_PREFIX):
        return Detected("ours", contract, build, n)
    if build is None and contract == CONTRACT_VERSION and names == UPSTREAM_V020_FUNCTIONS:
        return Detected("upstream-v0.2.0", contract, build, n)
    release = UPSTREAM_RELEASES.get((contract or "", n)) if build is None else None
    if release is not None and names >= UPSTREAM_V020_FUNCTIONS:
        return Detected(f"upstream-{release}", contract, build, n)
    return Detected("foreign", contract, build, n)


def refuse_foreign(node: Any, contract: str | None = None, build: str | None = None) -> None:
    """Raise ForeignLibrary unless the loaded library (if any) is ours or upstream v0.2.0's."""
    found = detect(node)
    if found.replaceable:
        return
    named = f"upstream FlowFabric {found.kind.removeprefix('upstream-')}: " if found.is_upstream else ""
    raise ForeignLibrary(
        f"Valkey already has another '{LIBRARY_NAME}' library ({named}{found.describe()}), not ours "
        f"(contract {CONTRACT_VERSION}) nor upstream v0.2.0's; left it loaded. It may belong to another "
        "deployment: use another Valkey, or replace it with --replace-library (FF_REPLACE_LIBRARY=1).")


def _primaries(client: Any) -> list[Any]:
    """Every primary to load on: the client itself, or each primary's node client in a cluster."""
    get_primaries = getattr(client, "get_primaries", None)
    if get_primaries is None:
        return [client]
    return [client.get_redis_connection(node) for node in get_primaries()]


def ensure_loaded(client: Any, *, force: bool = False, replace_foreign: bool = False,
                  lua_dir: Path = LUA_DIR) -> str:
    """Load the library where it is missing or differs; verify; return the build version. A loaded
    library that is not ours (nor upstream v0.2.0's) raises ForeignLibrary unless `replace_foreign`."""
    source, build = _source(lua_dir)
    for node in _primaries(client):
        loaded = loaded_versions(node)
        if not force and loaded == (CONTRACT_VERSION, build):
            continue
        if not replace_foreign:
            refuse_foreign(node)
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
        got = loaded_versions(node)
        if got != (CONTRACT_VERSION, build):
            raise LibraryError(f"library version mismatch after load: got {got}, want {(CONTRACT_VERSION, build)}")
    return build


_MISSING_MARKERS = ("function not loaded", "no matching function", "function not found", "noscript")


def self_heal(client: Any) -> str:
    """Reload after an FCALL met a missing function (a flush, a restarted node). Never replaces a library that
    is not ours, whatever FF_REPLACE_LIBRARY says: that flag is an operator's explicit choice at start, and a
    self-heal mid-run must not turn it into clobbering an upstream deployment's library that appeared since."""
    return ensure_loaded(client, force=True, replace_foreign=False)


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
    ap.add_argument("--replace-library", action="store_true",
                    help="replace a flowfabric library that is not ours (default: refuse and leave it)")
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
        print(ensure_loaded(client, force=ns.force, replace_foreign=ns.replace_library or env.replace_library))
    except LibraryError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
