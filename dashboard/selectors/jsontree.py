"""The JSON tree of the execution page, built without recursion so that no input can break the page.

`build(text)` scans the document once, left to right, with an explicit stack (never `json.loads`, whose
decoder recurses and raises RecursionError near depth 1,000), into a flat list of tokens that
`_json_tree.html` renders with one loop:

- `open` / `close`: a container, `<details>` whose summary shows its key and how many keys or items it has;
- `scalar`: one value as JSON text; a string longer than MAX_STRING_CHARS is cut, with the count left out;
- `fold`: a container nested deeper than MAX_DEPTH levels becomes one closed "…" node whose body is that
  container's source text (escaped like everything else), so the HTML never nests deeper than MAX_DEPTH;
- `more`: "N more…" in a container once MAX_NODES values have been shown on the page.

It accepts what `json.loads` accepts (NaN, Infinity and -Infinity included); duplicate keys are all shown.
Anything else (not JSON, or text after the document) gives None and the caller shows plain text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from json.decoder import scanstring  # type: ignore[attr-defined]  # the C-accelerated string decoder
from json.scanner import NUMBER_RE  # type: ignore[attr-defined]

#: Container levels drawn as a tree; deeper ones are folded into a "…" node.
MAX_DEPTH = 64
#: Values (scalars, containers, folds) drawn per document; the rest are counted as "N more…".
MAX_NODES = 2000
#: Characters of a string value (or key) shown; longer ones end with a note of what was cut.
MAX_STRING_CHARS = 4096
#: Characters of a folded container's source shown when it is expanded.
MAX_FOLD_CHARS = 16 * 1024

_WS = re.compile(r"[ \t\n\r]*")
# Longest first: "-Infinity" must win over the number pattern, which would fail on it.
_LITERALS = ("-Infinity", "Infinity", "NaN", "null", "true", "false")


class _Invalid(Exception):
    pass


@dataclass
class Token:
    kind: str  # "open" | "close" | "scalar" | "fold" | "more"
    key: str = ""
    value: str = ""  # scalar: JSON text; fold: source text
    count: int = 0  # open: keys/items; more: values not shown
    cut: int = 0  # scalar/fold: characters left out
    is_object: bool = False


@dataclass
class JsonTree:
    tokens: list[Token] = field(default_factory=list)
    #: Values in the document (shown or not).
    values: int = 0


@dataclass
class _Frame:
    is_object: bool
    token: Token | None  # the open or fold token; None inside a fold or past the node cap
    start: int  # source offset of its opening bracket
    items: int = 0
    hidden: int = 0


def _printable(text: str) -> str:
    # A lone surrogate ("\ud800" in the JSON) cannot be encoded into the UTF-8 response: show it escaped.
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _clip(text: str) -> tuple[str, int]:
    if len(text) <= MAX_STRING_CHARS:
        return text, 0
    return text[:MAX_STRING_CHARS], len(text) - MAX_STRING_CHARS


def _scalar(s: str, pos: int) -> tuple[str, int, int]:
    """The scalar at `pos` as (display text, characters cut, end offset)."""
    if s.startswith('"', pos):
        value, end = scanstring(s, pos + 1, True)
        shown, cut = _clip(value)
        return _printable(json.dumps(shown, ensure_ascii=False)), cut, end
    for lit in _LITERALS:
        if s.startswith(lit, pos):
            return lit, 0, pos + len(lit)
    m = NUMBER_RE.match(s, pos)
    if m is None:
        raise _Invalid
    shown, cut = _clip(m.group())
    return shown, cut, m.end()


def build(s: str) -> JsonTree | None:
    """The token list for the JSON document `s`, or None when `s` is not one JSON document."""
    try:
        return _build(s)
    except (_Invalid, ValueError):  # ValueError: a malformed string (json.JSONDecodeError)
        return None


def _build(s: str) -> JsonTree:
    tree = JsonTree()
    out = tree.tokens
    stack: list[_Frame] = []
    shown = 0
    key = ""
    pos = _WS.match(s, 0).end()  # type: ignore[union-attr]
    expect = "value"  # or "key" (inside an object) or "next" (after a value)
    while True:
        if expect == "value":
            tree.values += 1
            parent = stack[-1] if stack else None
            if parent is not None:
                parent.items += 1
            # Drawn unless inside a fold or past the node cap (then counted by its drawn parent).
            loud = parent is None or parent.token is not None and parent.token.kind == "open"
            if loud and shown >= MAX_NODES:
                loud = False
                if parent is not None:
                    parent.hidden += 1
            c = s[pos:pos + 1]
            if c in ("[", "{"):
                token = None
                if loud:
                    shown += 1
                    kind = "fold" if len(stack) >= MAX_DEPTH else "open"
                    token = Token(kind, _printable(_clip(key)[0]), is_object=c == "{")
                    out.append(token)
                stack.append(_Frame(c == "{", token, pos))
                pos = _WS.match(s, pos + 1).end()  # type: ignore[union-attr]
                if s.startswith("}" if c == "{" else "]", pos):
                    pos = _close(s, stack, out, pos)
                    expect = "next"
                elif c == "{":
                    expect = "key"
                else:
                    key = "0"
            else:
                text, cut, pos = _scalar(s, pos)
                if loud:
                    shown += 1
                    out.append(Token("scalar", _printable(_clip(key)[0]), text, cut=cut))
                expect = "next"
        elif expect == "key":
            if not s.startswith('"', pos):
                raise _Invalid
            key, pos = scanstring(s, pos + 1, True)
            pos = _WS.match(s, pos).end()  # type: ignore[union-attr]
            if not s.startswith(":", pos):
                raise _Invalid
            pos += 1
            expect = "value"
        else:  # "next"
            if not stack:
                if pos != len(s):
                    raise _Invalid  # text after the document
                return tree
            top = stack[-1]
            if s.startswith(",", pos):
                pos += 1
                expect = "key" if top.is_object else "value"
                key = str(top.items)
            elif s.startswith("}" if top.is_object else "]", pos):
                pos = _close(s, stack, out, pos)
            else:
                raise _Invalid
        pos = _WS.match(s, pos).end()  # type: ignore[union-attr]


def _close(s: str, stack: list[_Frame], out: list[Token], pos: int) -> int:
    """Close the innermost container, whose closing bracket is at `pos`; returns the offset after it."""
    frame = stack.pop()
    token = frame.token
    if token is not None and token.kind == "open":
        token.count = frame.items
        if frame.hidden:
            out.append(Token("more", count=frame.hidden))
        out.append(Token("close"))
    elif token is not None:  # a fold: its body is the source text
        source = s[frame.start:pos + 1]
        token.value = source[:MAX_FOLD_CHARS]
        token.cut = max(0, len(source) - MAX_FOLD_CHARS)
    return pos + 1
