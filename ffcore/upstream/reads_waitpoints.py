"""Upstream's composite suspensions, read for the waitpoint pages.

Ours stores a composite's tree in the suspension record (`composite = "1"`, `composite_tree_json`); upstream
(RFC-014) keeps it inside `resume_condition_json` itself — `{"v": 1, "composite": true, "tree": …}` — with the
nodes' own `path`s, and the waitpoint's condition hash says `composite = "1"` with the same tree in `tree_json`.
Both tick their matchers from the same satisfied set (`…:suspension:current:satisfied_set`).
"""

from __future__ import annotations

import json


def composite_tree(record: dict[str, str], condition: dict[str, str] | None = None) -> tuple[str, bool]:
    """(tree JSON, stored by upstream) of a composite suspension record; ("", False) when it is not one."""
    if record.get("composite_tree_json"):
        return record["composite_tree_json"], False
    try:
        spec = json.loads(record.get("resume_condition_json") or "null")
    except ValueError:
        spec = None
    if isinstance(spec, dict) and spec.get("composite") and isinstance(spec.get("tree"), dict):
        return json.dumps(spec["tree"]), True
    if condition and condition.get("composite") == "1" and condition.get("tree_json"):
        return condition["tree_json"], True
    return "", False
