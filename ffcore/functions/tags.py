"""FCALL builders of tags.lua (ours, under upstream's names): labels written after create (operations §3.2, §8.5)."""

from __future__ import annotations

from collections.abc import Sequence

from ..keys import ExecKeys, FlowKeys
from .base import Arg, Call, fn


def _pairs(tags: Sequence[tuple[str, str]]) -> list[Arg]:
    return [x for kv in tags for x in kv]


@fn("ff_set_execution_tags")
def set_execution_tags(k: ExecKeys, tags: Sequence[tuple[str, str]]) -> Call:
    """KEYS core, tags; ARGV k1, v1, k2, v2, … Replies OK(pair count)."""
    return Call("ff_set_execution_tags", [k.core, k.tags], _pairs(tags))


@fn("ff_set_flow_tags")
def set_flow_tags(f: FlowKeys, tags: Sequence[tuple[str, str]]) -> Call:
    """KEYS fcore, ftags; ARGV k1, v1, … (the first call also migrates dotted fields off the flow core)."""
    return Call("ff_set_flow_tags", [f.core, f.tags], _pairs(tags))


__all__ = ["set_execution_tags", "set_flow_tags"]
