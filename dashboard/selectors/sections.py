"""What the area read models share without importing the package (which imports them to register their
sections): how a payload is shown, and the registry of the execution page's extra sections."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ffcore.backend import Backend
from ffcore.execution.client import Execution

from .jsontree import build as json_tree

#: Shown of a payload/result before truncation (the rest is summarised, never dumped).
VIEW_CAP_BYTES = 64 * 1024
#: Shown of a binary value as a hex dump.
HEX_CAP_BYTES = 4096


@dataclass
class ValueView:
    kind: str  # "empty" | "json" | "text" | "hex"
    size: int
    value: Any = None
    truncated: bool = False

    @property
    def shown(self) -> int:
        """How many bytes of a truncated value the page shows (the rest: read it whole or download)."""
        return min(self.size, HEX_CAP_BYTES if self.kind == "hex" else VIEW_CAP_BYTES)


def view_bytes(data: bytes | None) -> ValueView:
    """How to show a payload: a JSON tree, text, or a hex dump (templates escape everything)."""
    if not data:
        return ValueView("empty", 0)
    size = len(data)
    shown = data[:VIEW_CAP_BYTES]
    try:
        s = shown.decode("utf-8")
    except UnicodeDecodeError as e:
        if size > VIEW_CAP_BYTES and e.reason == "unexpected end of data":
            s = shown[:e.start].decode("utf-8")  # the cap cut a multi-byte character: text all the same
        else:
            lines = [f"{i:08x}  {shown[i:i + 16].hex(' ')}" for i in range(0, min(len(shown), HEX_CAP_BYTES), 16)]
            return ValueView("hex", size, "\n".join(lines), size > HEX_CAP_BYTES)
    if size <= VIEW_CAP_BYTES:
        tree = json_tree(s)
        if tree is not None:
            return ValueView("json", size, tree)
    return ValueView("text", size, s, size > VIEW_CAP_BYTES)


#: Extra detail sections by name: each area registers a reader `(backend, execution) -> Any`
#: whose result the template reads as `d.extras.<name>` (e.g. suspension, flow, admission, stream).
DETAIL_SECTIONS: dict[str, Callable[[Backend, Execution], Any]] = {}


def detail_section(name: str) -> Callable[[Callable[[Backend, Execution], Any]], Callable[[Backend, Execution], Any]]:
    def register(fn: Callable[[Backend, Execution], Any]) -> Callable[[Backend, Execution], Any]:
        DETAIL_SECTIONS[name] = fn
        return fn

    return register
