"""Resume conditions of a typed suspend (operations §6.2), their wire JSON and their description in words.

    task.suspend("approved")                          # one name
    task.suspend(any_of("approve", "reject"))         # approve OR reject
    task.suspend(all_of("legal", "finance"))          # both
    task.suspend(quorum(2, of=3, name="approve"))     # 2 of 3 approvers
    task.suspend(n_of(2, "legal", "finance", "ops"))  # any 2 of these 3 names
    task.suspend(AllOf(wait_on("legal", "ok"), wait_on("finance", any_of("ok", "waive"))))  # two waitpoints
    task.suspend(AtLeast(2, wait_on("a"), wait_on("b"), wait_on("c")))                      # 2 of 3 waitpoints
    task.suspend(distinct_sources(2, "approvals", name="approve"))  # 2 different senders of "approve"
    task.suspend(Count(3, DISTINCT_SIGNALS, "a", "b"))               # any 3 signals over waitpoints a and b

A `Names` condition lives on one waitpoint and is the contract's own condition (contract §7.3:
`required_signal_names`, `signal_match_mode` any/all/count, `minimum_signal_count`), so
`ff_suspend_execution` and `ff_deliver_signal` evaluate it unchanged. `AllOf` / `AtLeast` / `Count` combine
waitpoints (each its own waitpoint, with its own key and token); they travel to `ff_suspend_typed` as
upstream v0.13's `{"v": 1, "composite": true, "tree": …}` (nodes `Single` / `AllOf` / `Count`, count kinds
DistinctWaitpoints / DistinctSignals / DistinctSources) and the contract's `ff_deliver_signal` evaluates a
signal on any of the waitpoints (lua/suspension.lua, lua/signal.lua).
Every constructor validates its input and raises ValueError naming the field.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: Deepest composite nesting (operations §1.5 MAX_COMPOSITE_DEPTH).
MAX_DEPTH = 4
MAX_NAMES = 64
MAX_WAITPOINTS = 64
MAX_NAME_LEN = 256
MODES = ("any", "all", "count")
REQUESTERS = ("worker", "operator", "policy", "system_timeout_policy")


def _name(v: object, field: str) -> str:
    if not isinstance(v, str):
        raise ValueError(f"{field}: signal names must be strings, got {type(v).__name__}")
    if not v:
        raise ValueError(f"{field}: a signal name must not be empty (use any_signal() for a wildcard)")
    if len(v) > MAX_NAME_LEN:
        raise ValueError(f"{field}: a signal name is at most {MAX_NAME_LEN} characters")
    return v


@dataclass(frozen=True)
class Names:
    """A condition on one waitpoint: matchers in order ("" = any name), `mode` any / all / count,
    `minimum` signals for any / count. Each signal satisfies at most one matcher."""

    names: tuple[str, ...]
    mode: str = "any"
    minimum: int = 1

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"signal_match_mode: {self.mode!r} is not one of {', '.join(MODES)}")
        if not self.names:
            raise ValueError("required_signal_names: at least one matcher is needed")
        if len(self.names) > MAX_NAMES:
            raise ValueError(f"required_signal_names: at most {MAX_NAMES} matchers")
        if isinstance(self.minimum, bool) or not isinstance(self.minimum, int) or self.minimum < 1:
            raise ValueError("minimum_signal_count: must be a whole number >= 1")
        if self.minimum > len(self.names):
            raise ValueError(f"minimum_signal_count: {self.minimum} exceeds the {len(self.names)} matchers "
                             "(it could never be satisfied)")

    def wire(self) -> dict[str, Any]:
        """The contract's condition fields (§7.3); the wildcard is the single name ""."""
        names = [] if self.names == ("",) else list(self.names)
        return {"condition_type": "signal_set", "required_signal_names": names,
                "signal_match_mode": self.mode, "minimum_signal_count": self.minimum}

    def words(self) -> str:
        return describe_names(list(self.names), self.mode, self.minimum)


def any_signal() -> Names:
    return Names(("",))


#: Never-matching names of the spec's OperatorOnly / TimeoutOnly conditions (operations §6).
OPERATOR_ONLY = "__operator_only__"
TIMEOUT_ONLY = "__timeout_only__"


def operator_only() -> Names:
    """No signal resumes it: an operator resume (or the timeout) does."""
    return Names((OPERATOR_ONLY,), "all")


def timeout_only() -> Names:
    """Only the timeout ends it (suspend needs timeout_ms / timeout_at)."""
    return Names((TIMEOUT_ONLY,), "all")


def any_of(*names: str) -> Names:
    """Resumes on the first signal carrying one of `names` ("approve OR reject")."""
    return Names(tuple(_name(n, "any_of") for n in _flat(names)), "any", 1)


def all_of(*names: str) -> Names:
    """Resumes once every name has arrived (in any order)."""
    return Names(tuple(_name(n, "all_of") for n in _flat(names)), "all", 1)


def n_of(n: int, *names: str) -> Names:
    """Resumes once `n` of the matchers are satisfied; a repeated name counts once per occurrence."""
    return Names(tuple(_name(x, "n_of") for x in _flat(names)), "count", n)


def quorum(n: int, *, of: int, name: str) -> Names:
    """`n` of `of` signals named `name` ("2 of 3 approvers")."""
    if isinstance(of, bool) or not isinstance(of, int) or of < 1:
        raise ValueError("of: must be a whole number >= 1")
    return n_of(n, *([_name(name, "quorum")] * of))


def _flat(names: Sequence[Any]) -> list[Any]:
    if len(names) == 1 and isinstance(names[0], (list, tuple)):
        return list(names[0])
    return list(names)


def coerce(conditions: Condition | str | Sequence[str] | None) -> Condition:
    """The simple forms keep their meaning: None / [] = any signal, "x" = x, [a, b] = all of them."""
    if conditions is None:
        return any_signal()
    if isinstance(conditions, (Names, AllOf, AtLeast, WaitOn, Count)):
        return conditions
    if isinstance(conditions, str):
        return Names((_name(conditions, "conditions"),))
    if isinstance(conditions, (list, tuple)):
        names = [_name(n, "conditions") for n in conditions]
        if not names:
            return any_signal()
        return Names(tuple(names), "any" if len(names) == 1 else "all")
    raise ValueError(f"conditions: expected a name, a list of names or a condition, got {type(conditions).__name__}")


# ------------------------------------------------------------------ several waitpoints
@dataclass(frozen=True)
class WaitOn:
    """One waitpoint of a composite: its key (unique within the suspension) and its own condition."""

    key: str
    condition: Names

    def __post_init__(self) -> None:
        if not isinstance(self.key, str) or not self.key or len(self.key) > 256:
            raise ValueError("waitpoint_key: a non-empty string of at most 256 characters")
        if not isinstance(self.condition, Names):
            raise ValueError("waitpoint condition: must be a signal-name condition (any_of, all_of, n_of, ...)")


def wait_on(key: str, condition: Names | str | Sequence[str] | None = None) -> WaitOn:
    c = coerce(condition)
    if not isinstance(c, Names):
        raise ValueError("wait_on: a waitpoint's own condition is a signal-name condition")
    return WaitOn(key, c)


@dataclass(frozen=True, init=False)
class AllOf:
    """Every member satisfied (order-free, sticky)."""

    members: tuple[Member, ...]

    def __init__(self, *members: Member) -> None:
        object.__setattr__(self, "members", tuple(_flat(members)))
        if not self.members:
            raise ValueError("composite: allof_empty_members (AllOf needs at least one member)")


@dataclass(frozen=True, init=False)
class AtLeast:
    """At least `n` members satisfied (count_kind DistinctWaitpoints)."""

    n: int
    members: tuple[Member, ...]

    def __init__(self, n: int, *members: Member) -> None:
        object.__setattr__(self, "n", n)
        object.__setattr__(self, "members", tuple(_flat(members)))
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError("composite: count_n_zero (AtLeast needs n >= 1)")
        if not self.members:
            raise ValueError("composite: count_waitpoints_empty (AtLeast needs members)")
        if n > len(self.members):
            raise ValueError(f"composite: count_exceeds_waitpoint_set ({n} of {len(self.members)} members)")


DISTINCT_WAITPOINTS = "DistinctWaitpoints"
DISTINCT_SIGNALS = "DistinctSignals"
DISTINCT_SOURCES = "DistinctSources"
COUNT_KINDS = (DISTINCT_WAITPOINTS, DISTINCT_SIGNALS, DISTINCT_SOURCES)


@dataclass(frozen=True, init=False)
class Count:
    """Upstream's Count node: `n` distinct satisfiers among the signals arriving on `waitpoints` (keys, each
    its own waitpoint) — distinct waitpoints, distinct signal ids, or distinct senders (`source_type` +
    `source_identity`); `name` (optional) counts only signals of that name."""

    n: int
    kind: str
    waitpoints: tuple[str, ...]
    name: str | None

    def __init__(self, n: int, kind: str, *waitpoints: str, name: str | None = None) -> None:
        object.__setattr__(self, "n", n)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "waitpoints", tuple(_flat(waitpoints)))
        object.__setattr__(self, "name", None if name is None else _name(name, "name"))
        if kind not in COUNT_KINDS:
            raise ValueError(f"count_kind: {kind!r} is not one of {', '.join(COUNT_KINDS)}")
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError("composite: count_n_zero (Count needs n >= 1)")
        if not self.waitpoints:
            raise ValueError("composite: count_waitpoints_empty (Count needs waitpoint keys)")
        for w in self.waitpoints:
            WaitOn(w, any_signal())  # validates the key
        if kind == DISTINCT_WAITPOINTS and n > len(self.waitpoints):
            raise ValueError(f"composite: count_exceeds_waitpoint_set ({n} of {len(self.waitpoints)} waitpoints)")


def distinct_sources(n: int, *waitpoints: str, name: str | None = None) -> Count:
    """`n` different senders (source_type:source_identity) — a quorum that one sender cannot fill alone."""
    return Count(n, DISTINCT_SOURCES, *waitpoints, name=name)


def distinct_signals(n: int, *waitpoints: str, name: str | None = None) -> Count:
    """`n` signals (distinct signal ids) over the waitpoints."""
    return Count(n, DISTINCT_SIGNALS, *waitpoints, name=name)


Member = WaitOn | AllOf | AtLeast | Count
Condition = Names | WaitOn | AllOf | AtLeast | Count


def leaves(c: Condition) -> list[WaitOn]:
    """The waitpoints of a composite in tree order (validates depth, member types and unique keys); a
    Count's waitpoints appear as wait_on(key) with any signal."""
    out: list[WaitOn] = []

    def walk(node: object, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise ValueError(f"composite: nested deeper than {MAX_DEPTH}")
        if isinstance(node, WaitOn):
            out.append(node)
        elif isinstance(node, Count):
            out.extend(WaitOn(w, any_signal()) for w in node.waitpoints)
        elif isinstance(node, (AllOf, AtLeast)):
            for m in node.members:
                walk(m, depth + 1)
        else:
            raise ValueError(f"composite: members must be wait_on(...), AllOf, AtLeast or Count, "
                             f"got {type(node).__name__}")

    walk(c, 0)
    if len(out) > MAX_WAITPOINTS:
        raise ValueError(f"composite: at most {MAX_WAITPOINTS} waitpoints")
    keys = [w.key for w in out]
    dup = sorted({k for k in keys if keys.count(k) > 1})
    if dup:
        raise ValueError(f"waitpoint_key: each waitpoint appears once in a composite (repeated: {', '.join(dup)})")
    return out


def is_composite(c: Condition) -> bool:
    return isinstance(c, (AllOf, AtLeast, WaitOn, Count))


def _matcher(names: Names) -> dict[str, str] | None:
    """Upstream's one-matcher form of a leaf condition, or None when it needs our matcher list."""
    if names.names == ("",):
        return {"kind": "Wildcard"}
    distinct = set(names.names)
    if len(distinct) == 1 and (names.mode == "any" and names.minimum == 1 or len(names.names) == 1):
        return {"kind": "ByName", "name": names.names[0]}
    return None


def tree(c: Condition) -> dict[str, Any]:
    """The wire tree in upstream v0.13's vocabulary (Single / AllOf / Count); a leaf with several matchers
    carries ours (`names`, `mode`, `minimum`) and an AtLeast over differing members our `members`."""
    if isinstance(c, WaitOn):
        m = _matcher(c.condition)
        if m is not None:
            return {"kind": "Single", "waitpoint_key": c.key, "matcher": m}
        return {"kind": "Single", "waitpoint_key": c.key, "names": list(c.condition.names),
                "mode": c.condition.mode, "minimum": c.condition.minimum}
    if isinstance(c, AllOf):
        return {"kind": "AllOf", "members": [tree(m) for m in c.members]}
    if isinstance(c, Count):
        node: dict[str, Any] = {"kind": "Count", "n": c.n, "count_kind": c.kind, "waitpoints": list(c.waitpoints)}
        if c.name is not None:
            node["matcher"] = {"kind": "ByName", "name": c.name}
        return node
    if isinstance(c, AtLeast):
        kids = [tree(m) for m in c.members]
        shared = {json.dumps(k.get("matcher"), sort_keys=True) for k in kids}
        if all(k["kind"] == "Single" and "matcher" in k for k in kids) and len(shared) == 1:
            node = {"kind": "Count", "n": c.n, "count_kind": DISTINCT_WAITPOINTS,
                    "waitpoints": [k["waitpoint_key"] for k in kids]}
            if kids[0]["matcher"]["kind"] == "ByName":
                node["matcher"] = kids[0]["matcher"]
            return node
        return {"kind": "Count", "n": c.n, "count_kind": DISTINCT_WAITPOINTS, "members": kids}
    raise ValueError("composite: not a composite condition")


def wire_json(c: Condition, timeout_behavior: str) -> str:
    """ARGV 12 of the suspend: the contract's condition, or upstream's composite envelope."""
    if isinstance(c, Names):
        body: dict[str, Any] = c.wire()
    else:
        body = {"v": 1, "composite": True, "tree": tree(c)}
    body["timeout_behavior"] = timeout_behavior
    body["allow_operator_override"] = True
    return json.dumps(body, separators=(",", ":"))


# ------------------------------------------------------------------ words
def describe_names(names: list[str], mode: str, minimum: int) -> str:
    """"approve", "any signal", "any of approve, reject", "all of legal, finance", "2 of 3 approvers:
    approve", "2 of 3: legal, finance, ops" — what a person reads on the inbox and the detail page."""
    names = list(names) or [""]
    if OPERATOR_ONLY in names:
        return "an operator only"
    if TIMEOUT_ONLY in names:
        return "the timeout only"
    shown = ["any signal" if n == "" else n for n in names]
    distinct = list(dict.fromkeys(shown))
    m = len(names)
    if mode == "all":
        if m == 1:
            return shown[0]
        if len(distinct) == 1:
            return f"all {m} of {distinct[0]}"
        return "all of " + ", ".join(shown)
    n = max(1, minimum)
    if n == 1:
        if m == 1 or len(distinct) == 1:
            return distinct[0]
        return "any of " + ", ".join(distinct)
    if n >= m and len(distinct) == m:
        return "all of " + ", ".join(shown)
    if len(distinct) == 1:
        who = "approvers" if distinct[0].startswith("approv") else "signals"
        return f"{n} of {m} {who}: {distinct[0]}"
    return f"{n} of {m}: " + ", ".join(shown)


def _leaf_words(node: dict[str, Any]) -> str:
    m = node.get("matcher")
    if isinstance(node.get("names"), list):
        try:
            minimum = int(node.get("minimum", 1))
        except (TypeError, ValueError):
            minimum = 1
        return describe_names([str(x) for x in node["names"]], str(node.get("mode", "any")), minimum)
    if isinstance(m, dict) and m.get("kind") == "ByName":
        return str(m.get("name", ""))
    return "any signal"


_KIND_WORDS = {DISTINCT_WAITPOINTS: "waitpoints", DISTINCT_SIGNALS: "signals", DISTINCT_SOURCES: "senders"}


def describe_tree(node: dict[str, Any]) -> str:
    """Words for a stored composite tree (from the suspension's resume_condition_json)."""
    kind = node.get("kind")
    if kind == "Single":
        return f"{_leaf_words(node)} on {node.get('waitpoint_key', '?')}"
    members = [describe_tree(m) for m in node.get("members") or [] if isinstance(m, dict)]
    if kind == "AllOf":
        return "all of (" + "; ".join(members) + ")"
    if kind == "Count":
        n = node.get("n", "?")
        if members:
            return f"{n} of {len(members)} waitpoints (" + "; ".join(members) + ")"
        wps = [str(w) for w in node.get("waitpoints") or []]
        what = _KIND_WORDS.get(str(node.get("count_kind")), "waitpoints")
        m = node.get("matcher")
        named = f" of {m.get('name')}" if isinstance(m, dict) and m.get("kind") == "ByName" else ""
        if what == "waitpoints":
            return f"{n} of {len(wps)} waitpoints{named} (" + ", ".join(wps) + ")"
        return f"{n} distinct {what}{named} on " + ", ".join(wps)
    return "unknown condition"


def describe_json(condition_json: str) -> str:
    """Words for a suspension's stored resume_condition_json (simple or composite); "" if unreadable."""
    try:
        c = json.loads(condition_json)
    except (TypeError, ValueError):
        return ""
    if not isinstance(c, dict):
        return ""
    if c.get("composite") and isinstance(c.get("tree"), dict):
        return describe_tree(c["tree"])
    names = c.get("required_signal_names") or []
    try:
        minimum = int(c.get("minimum_signal_count", 1))
    except (TypeError, ValueError):
        minimum = 1
    return describe_names([str(x) for x in names], str(c.get("signal_match_mode", "any")), minimum)


#: Upstream's satisfier token prefix per Count kind (DistinctWaitpoints the default).
_UPSTREAM_COUNT_TOKENS = {"DistinctWaitpoints": "wp:", "DistinctSignals": "sig:", "DistinctSources": "src:"}


def composite_matchers(tree_json: str, tokens: set[str], *, upstream: bool = False) -> list[tuple[str, str, bool]]:
    """(waitpoint key, signal name or "" for any, satisfied) per matcher of a stored composite tree, in tree
    order; `tokens` is the suspension's satisfied set. A Count shows one row per satisfier still needed.
    `upstream`: a tree upstream's library stored (its nodes carry their own `path`; a Count's satisfiers are
    `wp:` / `sig:` / `src:` tokens by its count kind)."""
    try:
        root = json.loads(tree_json)
    except (TypeError, ValueError):
        return []
    out: list[tuple[str, str, bool]] = []

    def walk(node: Any, path: str) -> None:
        if not isinstance(node, dict):
            return
        kind = node.get("kind")
        if upstream and isinstance(node.get("path"), str):
            path = node["path"]
        if kind == "Single":
            key = str(node.get("waitpoint_key", ""))
            names = node.get("names")
            if isinstance(names, list) and names:
                for i, n in enumerate(names):
                    out.append((key, str(n), f"m:{path}:{i}" in tokens))
            else:
                m = node.get("matcher")
                name = str(m.get("name", "")) if isinstance(m, dict) and m.get("kind") == "ByName" else ""
                out.append((key, name, f"leaf:{path}" in tokens))
            return
        members = node.get("members")
        if kind == "Count" and not members:
            m = node.get("matcher")
            name = str(m.get("name", "")) if isinstance(m, dict) and m.get("kind") == "ByName" else ""
            prefix = _UPSTREAM_COUNT_TOKENS.get(str(node.get("count_kind")), "wp:") if upstream else f"count:{path}:"
            got = sum(t.startswith(prefix) for t in tokens)
            raw_n = node.get("n")
            n = raw_n if isinstance(raw_n, int) else 1
            key = ", ".join(str(w) for w in node.get("waitpoints") or [])
            out.extend((key, name, i < got) for i in range(n))
            return
        for i, child in enumerate(members or []):
            walk(child, f"members[{i}]" if not path else f"{path}.members[{i}]")

    walk(root, "")
    return out
