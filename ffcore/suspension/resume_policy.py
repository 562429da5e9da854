"""What happens when a suspension's condition is satisfied (ResumePolicy, v0.13 contracts), with the seed's
canonical defaults. Stored verbatim with the suspension (`resume_policy_json`); the engine reads the condition,
not these flags — they are there for readers and for an upstream-compatible record."""

from __future__ import annotations

import json
from dataclasses import dataclass

#: v1 ships one resume target: back to runnable, through normal scheduling.
RESUME_TARGETS = ("runnable",)


@dataclass(frozen=True)
class ResumePolicy:
    resume_target: str = "runnable"
    consume_matched_signals: bool = True
    retain_signal_buffer_until_closed: bool = False
    resume_delay_ms: int | None = None
    close_waitpoint_on_resume: bool = True

    def __post_init__(self) -> None:
        if self.resume_target not in RESUME_TARGETS:
            raise ValueError(f"resume_policy.resume_target: must be one of {', '.join(RESUME_TARGETS)}")
        for name in ("consume_matched_signals", "retain_signal_buffer_until_closed", "close_waitpoint_on_resume"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"resume_policy.{name}: must be true or false")
        d = self.resume_delay_ms
        if d is not None and (isinstance(d, bool) or not isinstance(d, int) or not 0 <= d <= 2**53 - 1):
            raise ValueError("resume_policy.resume_delay_ms: must be a non-negative whole number of ms")

    def to_json(self) -> str:
        """The stored `resume_policy_json` (resume_delay_ms omitted when unset, as upstream serialises it)."""
        out: dict[str, object] = {"resume_target": self.resume_target,
                                  "consume_matched_signals": self.consume_matched_signals,
                                  "retain_signal_buffer_until_closed": self.retain_signal_buffer_until_closed,
                                  "close_waitpoint_on_resume": self.close_waitpoint_on_resume}
        if self.resume_delay_ms is not None:
            out["resume_delay_ms"] = self.resume_delay_ms
        return json.dumps(out, separators=(",", ":"))
