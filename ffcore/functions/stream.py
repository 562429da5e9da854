"""FCALL builders of stream.lua: attempt stream frames (contract §5.29–§5.30)."""

from __future__ import annotations

from ..keys import ExecKeys
from .base import Arg, Call, fn
from .lifecycle import Fence

#: SDK constants (worker-sdk §3.5): exact trim to 10 000 entries, 64 KiB payload cap.
DEFAULT_RETENTION_MAXLEN = 10_000
DEFAULT_MAX_PAYLOAD_BYTES = 65_536
#: ff_read_attempt_stream refuses larger counts (`count_limit_exceeds_hard_cap`).
STREAM_READ_HARD_CAP = 10_000


@fn("ff_append_frame")
def append_frame(
    k: ExecKeys, f: Fence, *, frame_type: str, payload: bytes = b"", ts: int | None = None, encoding: str = "utf8",
    correlation_id: str = "", source: str = "worker", retention_maxlen: int = DEFAULT_RETENTION_MAXLEN,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES, metadata_json: str = "",
) -> Call:
    """Append one frame to the holder's attempt stream (lease-fenced; `ts` None → server now). `metadata_json`
    (ours, ARGV 20 after upstream v0.13's six stream-mode slots, sent empty) is stored in a field of its own."""
    i = f.attempt_index
    args: list[Arg] = [
        k.eid, i, f.lease_id, f.lease_epoch, frame_type, "" if ts is None else ts, payload, encoding,
        correlation_id, source, retention_maxlen, f.attempt_id, max_payload_bytes,
    ]
    if metadata_json:
        args += ["", "", "", "", "", "", metadata_json]
    return Call("ff_append_frame", [k.core, k.stream(i), k.stream_meta(i)], args)


@fn("ff_read_attempt_stream")
def read_attempt_stream(k: ExecKeys, attempt_index: int, *, from_id: str = "-", to_id: str = "+",
                        count_limit: int = 100) -> Call:
    """XRANGE of one attempt stream plus its close marker; reply raw[0] holds the entries."""
    i = attempt_index
    return Call("ff_read_attempt_stream", [k.stream(i), k.stream_meta(i)], [from_id, to_id, count_limit],
                readonly=True)


@fn("ff_read_summary")
def read_summary(k: ExecKeys, attempt_index: int) -> Call:
    """Upstream's (v0.13+) read of an attempt's rolling summary document; raw = [document, version, patch_kind,
    last_updated_ms, first_applied_ms], ("", "0", "", "0", "0") when no summary was ever written."""
    return Call("ff_read_summary", [k.stream_summary(attempt_index)], [], readonly=True)
