"""Claimed-task operations: attempt stream frames (mixed into ClaimedTask)."""

from __future__ import annotations

import asyncio
import functools
import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ffcore import functions as F
from ffcore.errors import ScriptError
from ffcore.functions.stream import DEFAULT_MAX_PAYLOAD_BYTES, DEFAULT_RETENTION_MAXLEN
from ffcore.policy import stream_retention_maxlen

if TYPE_CHECKING:
    from ffcore.backend import Backend
    from ffcore.keys import ExecKeys


@dataclass(frozen=True)
class AppendFrameOutcome:
    """`stream_id` is the new entry's id; `frame_count` counts every append of the attempt (not the kept ones)."""

    stream_id: str
    frame_count: int


class StreamOps:
    """Methods here use the ClaimedTask attributes (backend, keys, fence, execution_id, attempt_index, ...)."""

    if TYPE_CHECKING:
        backend: Backend
        policy: dict[str, Any]

        @property
        def keys(self) -> ExecKeys: ...

        @property
        def fence(self) -> F.Fence: ...

        def _check(self, reply_error: ScriptError) -> None: ...

    def append_frame(self, frame_type: str, payload: bytes | str = b"", metadata: str | None = None, *,
                     encoding: str = "utf8", source: str = "worker", correlation_id: str | None = None,
                     metadata_json: str | None = None,
                     max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES) -> AppendFrameOutcome:
        """Append one frame to this attempt's output stream (worker-sdk §3.5, AppendFrameArgs).

        `encoding` (default "utf8") and `source` (default "worker") are stored on the frame. Its correlation id
        is `correlation_id` (or `metadata`, the positional name upstream's v0.2.0 SDK sent in that slot; giving
        both differently raises); `metadata_json` (checked to be JSON) is stored in a field of its own, so both
        can be given. Payloads over `max_payload_bytes` (default 64 KiB) raise `retention_limit_exceeded`; a
        lost lease raises `stale_owner_cannot_append` or `stream_closed` (and marks the task's lease lost).
        """
        if not frame_type:
            raise ValueError("frame_type must not be empty")
        for name, value in (("encoding", encoding), ("source", source)):
            if not value or len(value) > 64 or any(ord(ch) < 0x21 for ch in value):
                raise ValueError(f"{name} must be 1..64 printable characters without spaces")
        if metadata and correlation_id and metadata != correlation_id:
            raise ValueError("metadata and correlation_id are the same field (the frame's correlation id): give one")
        if isinstance(max_payload_bytes, bool) or not isinstance(max_payload_bytes, int) \
                or not 0 <= max_payload_bytes <= 2**32 - 1:
            raise ValueError("max_payload_bytes must be an integer 0..4294967295")
        if metadata_json:
            try:
                json.loads(metadata_json)
            except ValueError:
                raise ValueError("metadata_json is not valid JSON") from None
        data = payload.encode() if isinstance(payload, str) else payload
        try:
            reply = self.backend.call(F.append_frame(self.keys, self.fence, frame_type=frame_type, payload=data,
                                                     ts=int(time.time() * 1000), encoding=encoding, source=source,
                                                     correlation_id=correlation_id or metadata or "",
                                                     retention_maxlen=self._retention_maxlen(),
                                                     max_payload_bytes=max_payload_bytes,
                                                     metadata_json=metadata_json or ""))
        except ScriptError as e:
            if e.code != "retention_limit_exceeded":
                self._check(e)
            raise
        return AppendFrameOutcome(reply[0], int(reply[1]))

    def _retention_maxlen(self) -> int:
        """The policy's stream_policy.retention_maxlen, else the library default."""
        return stream_retention_maxlen(self.policy) or DEFAULT_RETENTION_MAXLEN

    async def aappend_frame(self, frame_type: str, payload: bytes | str = b"", metadata: str | None = None,
                            **kw: Any) -> AppendFrameOutcome:
        return await asyncio.to_thread(functools.partial(self.append_frame, frame_type, payload, metadata, **kw))
