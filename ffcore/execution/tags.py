"""Tags after create (operations §3.2, §8.5): validation shared by executions and flows, and the
execution's write.

A tag written after create must be named `<caller>.<field>` (a–z, then a–z 0–9 _, a dot, then a
non-dot character): the engine's own fields are dot-free, so a caller can never shadow one. The library
checks the rule again; checking here first gives the same `invalid_tag_key` error without a round trip.

Every door (create through REST, the Client or a schedule's template; `POST …/tags`) checks tags here:
create also takes the engine-style dot-free names (`team`), but nothing else — no empty, spaced or
markup keys — and an execution holds at most MAX_TAGS (5,000 at create once failed inside Lua).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ffcore import events
from ffcore import functions as F
from ffcore.backend import Backend
from ffcore.errors import ERRORS, InvalidInput
from ffcore.execution import filter_index
from ffcore.keys import ExecKeys
from ffcore.reads import text

#: The library's rule (`^[a-z][a-z0-9_]*\.[^.]`).
TAG_KEY = re.compile(r"^[a-z][a-z0-9_]*\.[^.]")
#: Names a create may also give (upstream's examples use dot-free names like `team`).
CREATE_KEY = re.compile(r"^[a-z][a-z0-9_]*\Z")
#: Bounds (ours): tags of one execution (at create, or after it counting those it has), key length, value
#: length (characters).
MAX_TAGS = 64
MAX_KEY_CHARS = 128
MAX_VALUE_CHARS = 4096

InvalidTagKey = ERRORS["invalid_tag_key"]


def check_tags(tags: Mapping[str, str], *, at_create: bool = False) -> list[tuple[str, str]]:
    """The pairs to write, sorted by key (two callers with the same tags send the same ARGV), or
    `invalid_input` / `invalid_tag_key` naming what is wrong. Nothing is written on any error.

    `at_create`: no tags is fine, dot-free names are allowed, and a bad key is `invalid_input` naming
    `tags` (a schedule's template reports it as `template.tags`)."""
    if at_create and (tags is None or (isinstance(tags, Mapping) and not tags)):
        return []
    if not isinstance(tags, Mapping) or not tags:
        raise InvalidInput("invalid_input", ["tags: give at least one tag"])
    if len(tags) > MAX_TAGS:
        raise InvalidInput("invalid_input", [f"tags: at most {MAX_TAGS} per execution (got {len(tags)})"])
    out = []
    for k, v in sorted(tags.items(), key=lambda kv: str(kv[0])):
        if not isinstance(k, str) or len(k) > MAX_KEY_CHARS or not k.isprintable() or not (
                TAG_KEY.match(k) or (at_create and CREATE_KEY.match(k))):
            if at_create:
                raise InvalidInput("invalid_input", [f"tags: the key {str(k)[:64]!r} must be a lowercase name "
                                                     "(a-z, 0-9, _) or <caller>.<field>, at most "
                                                     f"{MAX_KEY_CHARS} characters"])
            raise InvalidTagKey("invalid_tag_key", [str(k)])
        if not isinstance(v, str) or len(v) > MAX_VALUE_CHARS:
            raise InvalidInput("invalid_input", [f"tags.{k}: the value must be text of at most {MAX_VALUE_CHARS} "
                                                 "characters"])
        out.append((k, v))
    return out


def set_execution_tags(backend: Backend, eid: str, tags: Mapping[str, str]) -> int:
    """Add or overwrite tags of an execution (`ff_set_execution_tags`); returns the pair count."""
    k = ExecKeys(eid)
    pairs = check_tags(tags)
    # The cap counts the tags the execution already has (a check before the write: two racing calls could
    # pass it together, which bounds the overshoot to one call's worth). Our per-tag listing indexes
    # (ffcore.execution.filter_index): the old values' entries go, the new come.
    pipe = backend.client.pipeline(transaction=False)
    pipe.hkeys(k.tags)
    pipe.hget(k.core, "created_at")
    pipe.hmget(k.tags, [key for key, _ in pairs])
    have_raw, created, old = pipe.execute()
    have = {text(f) for f in have_raw}
    if len(have | {p[0] for p in pairs}) > MAX_TAGS:
        raise InvalidInput("invalid_input", [f"tags: at most {MAX_TAGS} per execution "
                                             f"(it has {len(have)}; this call adds {len(pairs)})"])
    reply = backend.call(F.set_execution_tags(k, pairs))
    pipe = backend.client.pipeline(transaction=False)
    filter_index.drop(pipe, k.eid, "", {key: text(v) for (key, new), v in zip(pairs, old, strict=True)
                                        if v is not None and text(v) != new})
    filter_index.add(pipe, k.eid, int(text(created) or 0), "", dict(pairs))
    pipe.execute()
    events.publish(backend, ids=[k.eid])
    return int(reply[0])
