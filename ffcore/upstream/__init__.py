"""Upstream mode: operating a Valkey whose `flowfabric` library is upstream FlowFabric's (v0.13 / v0.14-v0.15).

Detected once at connect (read-only FUNCTION LIST, `ffcore.library.detect`) and kept on the backend as an
`UpstreamMode`; everything that differs on such a deployment asks it (`backend.upstream`) instead of probing
Valkey again. In this mode nothing of ours is ever loaded, reloaded or rotated, and upstream's keys are written
only through upstream's own functions (`ffcore/functions/upstream_v34.py`); indexes upstream does not keep live
under `ff:up:` (`ffcore/upstream/reconcile.py`, read through `ffcore/upstream/reads.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import FFError
from ..functions import Call
from ..functions.upstream_v34 import to_v34
from ..library import Detected

#: What pages say about a feature that needs a function only our library has.
ONLY_OURS = {
    "schedules": "Schedules need ff_schedule_* functions that only this project's library has.",
    "typed_suspend": "Typed suspensions (approval, timer) need ff_suspend_typed, which only our library has.",
    "bulk_signal": "The bulk-signal fast path needs a function only our library has; signal one waitpoint "
                   "at a time.",
    "tags": "Tag edits go through ff_set_execution_tags on upstream; the tag index of ours is not kept there.",
    "events": "Upstream publishes no ff:events channel; live pages poll instead.",
}


class NotOnUpstream(FFError):
    """The operation needs a function or record only our library keeps; upstream mode refuses it cleanly."""

    def __init__(self, what: str, release: str) -> None:
        super().__init__(f"{what} is not available on upstream FlowFabric {release}")
        self.what = what
        self.release = release


@dataclass(frozen=True)
class UpstreamMode:
    """The upstream release a backend operates (None on the backend = our own library)."""

    detected: Detected

    @property
    def release(self) -> str:
        """"v0.13" or "v0.14-v0.15"."""
        return self.detected.kind.removeprefix("upstream-")

    @property
    def label(self) -> str:
        """The banner's and the top bar's words."""
        return f"upstream FlowFabric {self.release} (ff_version {self.detected.contract}, " \
               f"{self.detected.functions} functions)"

    @property
    def per_namespace_workers(self) -> bool:
        """v0.14 moved the worker registry under the namespace (`ff:worker:<ns>:<wiid>:alive`)."""
        return self.release != "v0.13"

    @property
    def display(self) -> str:
        """The top bar's words: "Operating upstream FlowFabric v0.14–v0.15 (ff_version 34)"."""
        return f"Operating upstream FlowFabric {self.release.replace('-', '–')} " \
               f"(ff_version {self.detected.contract})"

    def refuse(self, what: str) -> NotOnUpstream:
        return NotOnUpstream(what, self.release)

    def shape(self, call: Call) -> Call:
        """The switch every FCALL passes in upstream mode: `call` in the operated release's shape
        (`ffcore/functions/upstream_v34.py`), or NotOnUpstream. v0.13's shapes are not declared (no release
        of it to test against): its reads pass, its writes are refused rather than guessed."""
        if self.detected.contract == "34":
            shaped = to_v34(call)
            if shaped is None:
                raise self.refuse(f"{call.function} in this call shape")
            return shaped
        if call.readonly:
            return call
        raise self.refuse(f"{call.function} (writes on {self.release} are not supported)")


def operated(detected: Detected) -> UpstreamMode | None:
    """Upstream mode for a library we must not replace; None for ours, none at all, or v0.2.0 (which ours is
    call-compatible with and replaces, as before)."""
    if detected.is_upstream and not detected.replaceable:
        return UpstreamMode(detected)
    return None
