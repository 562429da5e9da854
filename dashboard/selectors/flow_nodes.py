"""What a DAG node says about its member (#36): a name an operator recognises, its state and how long it ran;
and which member the flow page opens on.

A member's name is the value of its first tag whose key ends in `.name` (`app.name`, `ops.name`, …); without
one it is its kind and the first 8 hex digits of its id, so eight members of one kind still tell apart."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ffcore.backend import Backend
from ffcore.keys import ExecKeys
from ffcore.reads import text

#: Longest name drawn in a node (its tooltip carries the whole name).
NAME_MAX = 32
#: The members a flow page opens on, in this order: what went wrong, what runs, what is held; else the root.
START_ORDER = {"failed": 0, "expired": 1, "active": 2, "suspended": 3, "rate_limited": 4}


def _pairs(raw: Any) -> dict[str, str]:
    # HGETALL: a flat list on the direct connection, a dict through a cluster pipeline.
    if isinstance(raw, dict):
        return {text(k): text(v) for k, v in raw.items()}
    items = list(raw or [])
    return {text(items[i]): text(items[i + 1]) for i in range(0, len(items) - 1, 2)}


def short_id(eid: str) -> str:
    return eid.rsplit(":", 1)[-1][:8]


def name_of(kind: str, eid: str, tags: Mapping[str, str]) -> str:
    named = sorted(k for k in tags if k.endswith(".name") and tags[k].strip())
    if named:
        return tags[named[0]].strip()
    return f"{kind or 'execution'} {short_id(eid)}"


def node_details(backend: Backend, kinds: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """Per drawn member (eid → kind): name, started and ended (epoch ms, 0 = not yet) in one round trip."""
    eids = list(kinds)
    cmds: list[tuple[Any, ...]] = []
    for e in eids:
        k = ExecKeys(e)
        cmds += [("HMGET", k.core, "started_at", "completed_at"), ("HGETALL", k.tags)]
    raw = backend.read_many(cmds)
    out: dict[str, dict[str, Any]] = {}
    for i, e in enumerate(eids):
        started, ended = (_ms(v) for v in raw[2 * i])
        out[e] = {"name": name_of(kinds[e], e, _pairs(raw[2 * i + 1])), "started": started, "ended": ended}
    return out


def _ms(v: Any) -> int:
    try:
        return int(text(v) or 0)
    except ValueError:
        return 0


def start_member(states: Mapping[str, str], roots: Iterable[str]) -> str:
    """The first failed / running / held member (by id, so a reload opens the same one), else the first root."""
    ranked = sorted((START_ORDER[s], e) for e, s in states.items() if s in START_ORDER)
    if ranked:
        return ranked[0][1]
    return next(iter(sorted(roots)), "") or min(states, default="")
