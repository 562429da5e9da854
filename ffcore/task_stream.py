"""Claimed-task operations: attempt stream frames (mixed into ClaimedTask)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from . import functions as F
from .errors import ScriptError

if TYPE_CHECKING:
    from .backend import Backend
    from .keys import ExecKeys


@dataclass(frozen=True)
class AppendFrameOutcome:
    """`stream_id` is the new entry's id; `frame_count` counts every append of the attempt (not the kept ones)."""

    stream_id: str
    frame_count: int


class StreamOps:
    """Methods here use the ClaimedTask attributes (backend, keys, fence, execution_id, attempt_index, ...)."""

    if TYPE_CHECKING:
        backend: Backend

        @property
        def keys(self) -> ExecKeys: ...

        @property
        def fence(self) -> F.Fence: ...

        def _check(self, reply_error: ScriptError) -> None: ...

    def append_frame(self, frame_type: str, payload: bytes | str = b"",
                     metadata: str | None = None) -> AppendFrameOutcome:
        """Append one frame to this attempt's output stream (worker-sdk §3.5).

        `metadata` is stored as the frame's correlation id. Payloads over 64 KiB raise
        `retention_limit_exceeded`; a lost lease raises `stale_owner_cannot_append` or `stream_closed`
        (and marks the task's lease lost).
        """
        if not frame_type:
            raise ValueError("frame_type must not be empty")
        data = payload.encode() if isinstance(payload, str) else payload
        try:
            reply = self.backend.call(F.append_frame(self.keys, self.fence, frame_type=frame_type, payload=data,
                                                     ts=int(time.time() * 1000), correlation_id=metadata or ""))
        except ScriptError as e:
            if e.code != "retention_limit_exceeded":
                self._check(e)
            raise
        return AppendFrameOutcome(reply[0], int(reply[1]))

    async def aappend_frame(self, frame_type: str, payload: bytes | str = b"",
                            metadata: str | None = None) -> AppendFrameOutcome:
        return await asyncio.to_thread(self.append_frame, frame_type, payload, metadata)
