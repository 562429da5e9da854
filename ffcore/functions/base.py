"""FCALL plumbing: Call, Reply, reply parsers and the table every builder registers in.

Each entry is a builder that takes typed arguments and returns a `Call` (function name, KEYS, ARGV in
the contract's order) plus the parser for its reply. `Backend.call()` runs it; error replies become
the typed exceptions of `ffcore.errors` here, never in callers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import ScriptError, script_error

Arg = str | bytes | int


def _s(v: Any) -> str:
    if isinstance(v, bytes):
        return v.decode("utf-8", "surrogateescape")
    return "" if v is None else str(v)


@dataclass(frozen=True)
class Reply:
    """A success reply `{1, status, fields...}`; `raw` keeps the undecoded elements."""

    status: str
    fields: list[str]
    raw: list[Any] = field(repr=False, default_factory=list)

    def __getitem__(self, i: int) -> str:
        return self.fields[i]


def parse_status(function: str, raw: Any) -> Reply:
    if not isinstance(raw, list) or not raw:
        raise ScriptError("unexpected_reply", [repr(raw)[:200]], function)
    if raw[0] == 1:
        return Reply(_s(raw[1]), [_s(x) for x in raw[2:]], raw[2:])
    if raw[0] == 0:
        raise script_error(_s(raw[1]), [_s(x) for x in raw[2:]], function)
    raise ScriptError("unexpected_reply", [repr(raw)[:200]], function)


def parse_bare(function: str, raw: Any) -> Reply:
    """Replies without an integer status (ff_check_admission_and_record) — errors still use `{0, code}`."""
    if isinstance(raw, list) and raw and raw[0] == 0:
        raise script_error(_s(raw[1]), [_s(x) for x in raw[2:]], function)
    if not isinstance(raw, list) or not raw:
        raise ScriptError("unexpected_reply", [repr(raw)[:200]], function)
    return Reply(_s(raw[0]), [_s(x) for x in raw[1:]], raw[1:])


def parse_string(function: str, raw: Any) -> Reply:
    return Reply(_s(raw), [], [raw])


Parser = Callable[[str, Any], Reply]


@dataclass(frozen=True)
class Call:
    function: str
    keys: list[str]
    args: list[Arg]
    parse: Parser = parse_status
    readonly: bool = False


#: name -> builder, filled by the @fn decorator below; the single declaration of every FCALL.
TABLE: dict[str, Callable[..., Call]] = {}


def fn(name: str) -> Callable[[Callable[..., Call]], Callable[..., Call]]:
    def register(builder: Callable[..., Call]) -> Callable[..., Call]:
        TABLE[name] = builder
        return builder

    return register


def opt(v: int | None) -> Arg:
    """Optional number ARGV: "" when absent."""
    return "" if v is None else v
