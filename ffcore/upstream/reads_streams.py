"""Upstream's stream modes (RFC-015), read for the stream page: the frames themselves read as ours do.

Each frame names its `mode` ("durable", "summary" or "best_effort"). Summary frames are JSON merge patches that
upstream folds into one document (`stream_summary` hash: `document`, `version`, `last_updated_ms`) while keeping
only the newest ~64 frames; best-effort frames carry a `ttl_ms`, and a stream that never held a durable frame
expires as a whole (PEXPIRE on the stream key), so what the page shows may vanish — it says when.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..keys import ExecKeys
from ..reads import decode_map, text

if TYPE_CHECKING:
    from ..backend import Backend


@dataclass(frozen=True)
class StreamModes:
    #: The newest frame's mode ("" when the stream is empty or written by our library).
    mode: str
    #: The summary document (JSON text) and its version, when summary frames were written.
    summary: str
    summary_version: str
    summary_updated_at: str
    #: Milliseconds until the whole stream expires (best-effort only streams), None when it does not.
    expires_in_ms: int | None


def stream_modes(backend: Backend, eid: str, attempt: int) -> StreamModes:
    k = ExecKeys(eid)
    pipe = backend.client.pipeline(transaction=False)
    pipe.xrevrange(k.stream(attempt), "+", "-", count=1)
    pipe.hgetall(k.stream_summary(attempt))
    pipe.pttl(k.stream(attempt))
    newest, summary_raw, ttl = pipe.execute()
    mode = text(decode_map(newest[0][1]).get("mode", "")) if newest else ""
    s = decode_map(summary_raw)
    return StreamModes(mode, s.get("document", ""), s.get("version", ""), s.get("last_updated_ms", ""),
                       int(ttl) if ttl is not None and int(ttl) >= 0 else None)
