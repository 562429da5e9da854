"""Valkey keyspace snapshots, compared before and after a refused request to show that nothing was written."""

from __future__ import annotations

from typing import Any

#: A well-formed execution id that names no execution.
MISSING_EID = "{fp:86}:6ba7b810-9dad-11d1-80b4-00c04fd430c8"
#: A well-formed UUID that names nothing (flows, budgets, waitpoints).
MISSING_UUID = "6ba7b811-9dad-11d1-80b4-00c04fd430c8"


def keyspace(backend: Any) -> dict[bytes, bytes | None]:
    """Every key with its DUMP (type, value and encoding): a new, deleted or changed key makes it differ."""
    names = sorted(backend.client.keys("*"))
    pipe = backend.client.pipeline(transaction=False)
    for name in names:
        pipe.dump(name)
    return dict(zip(names, pipe.execute(), strict=True))


def changed(before: dict[bytes, bytes | None], after: dict[bytes, bytes | None]) -> list[str]:
    """The keys that were added, removed or rewritten (readable in an assertion message)."""
    names = sorted(set(before) | set(after))
    return [n.decode(errors="replace") for n in names if before.get(n) != after.get(n)]


def write_count(backend: Any) -> int:
    """Valkey's count of writes since the last save: unchanged means nothing was written (or expired)."""
    return int(backend.client.info("persistence")["rdb_changes_since_last_save"])


class Watch:
    """`changed()` for many requests in a row, cheaply: the whole keyspace is read again only when Valkey's
    write counter moved (a write that left every key byte-identical still reads as no change)."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.base = keyspace(backend)
        self.dirty = write_count(backend)

    def wrote(self) -> list[str]:
        dirty = write_count(self.backend)
        if dirty == self.dirty:
            return []
        now = keyspace(self.backend)
        out = changed(self.base, now)
        self.base, self.dirty = now, write_count(self.backend)
        return out

