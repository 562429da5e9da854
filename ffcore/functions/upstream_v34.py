"""Call shapes of upstream FlowFabric's v34 library (v0.14-v0.15, `ff_version` "34"), for upstream mode.

Upstream mode (`ffcore.upstream`) sends every FCALL through `to_v34`: this is the one place where a call built
by our table (`ffcore/functions/*`, v0.2.0 / v0.13 shapes) becomes the shape upstream's library reads. Each
function the dashboard's operator actions (and pages) make is declared here with the KEYS / ARGV counts upstream's
code reads (tests/ffcore/test_upstream_shapes.py checks them against the released library); those whose shape
grew since v0.2.0 are adapted (`ff_deliver_signal` already carries its KEYS[15], the signal-delivery stream;
`ff_cancel_flow` records the owed member cancels in KEYS[4..5]; `ff_read_attempt_stream` takes a visibility
filter, "" = every frame).
Functions whose v34 shape changed and that no action needs are declared by count only: a call already in that
shape passes, any other is refused (a `None` from `to_v34`) instead of reaching upstream's Lua half-formed.
Functions not declared at all pass unchanged: one only our library has is missing there, which the backend
answers with `NotOnUpstream`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from ..keys import partition_of_key
from .base import Arg, Call


@dataclass(frozen=True)
class Shape:
    """KEYS and ARGV counts of one v34 function; `extra` = a trailing variadic group (KEYS, ARGV per item)."""

    keys: int
    args: int
    extra: tuple[int, int] | None = None
    #: Turns our call into this shape (None: ours already is).
    adapt: Callable[[Call], Call] | None = None

    def fits(self, call: Call) -> bool:
        nk, na = len(call.keys) - self.keys, len(call.args) - self.args
        if self.extra is None:
            return nk == 0 and na == 0
        ek, ea = self.extra
        return nk >= 0 and na >= 0 and nk % ek == 0 and na % ea == 0 and nk // ek == na // ea


def _cancel_flow_with_backlog(call: Call) -> Call:
    """v0.2.0's 3 KEYS / 4 ARGV -> v0.13+'s 5 / 5 (pending-cancels set, partition backlog, default grace)."""
    if len(call.keys) != 3:
        return call
    from .. import keys

    n, flow_id = partition_of_key(call.keys[0]), str(call.args[0])
    args: list[Arg] = [*call.args, ""]  # "" = upstream's default grace (30 s)
    return replace(call, keys=[*call.keys, keys.flow_pending_cancels(n, flow_id), keys.cancel_backlog(n)],
                   args=args)


def _stream_read_all(call: Call) -> Call:
    """v0.2.0's 3 ARGV + visibility "" (every frame, best-effort ones included: what the pages show)."""
    return replace(call, args=[*call.args, ""]) if len(call.args) == 3 else call


#: function -> its v34 shape. The first group is what operator actions call (cancel, replay, signal, change
#: priority, revoke, cancel flow + per-member cancel + ack, reset budget + unblock, take now).
V34: dict[str, Shape] = {
    "ff_cancel_execution": Shape(21, 5),
    "ff_replay_execution": Shape(4, 2, extra=(1, 1)),  # a skipped member: 3 more KEYS then one per edge
    "ff_deliver_signal": Shape(15, 18),  # ours passes the signal-delivery stream too
    "ff_buffer_signal_for_pending_waitpoint": Shape(9, 18),
    "ff_change_priority": Shape(2, 2),
    "ff_revoke_lease": Shape(5, 3),
    "ff_cancel_flow": Shape(5, 5, adapt=_cancel_flow_with_backlog),
    "ff_ack_cancel_member": Shape(2, 2),
    "ff_reset_budget": Shape(3, 2),
    "ff_unblock_execution": Shape(3, 3),
    "ff_issue_grant_and_claim": Shape(11, 11),
    "ff_close_waitpoint": Shape(3, 2),
    "ff_read_attempt_stream": Shape(2, 4, adapt=_stream_read_all),  # the execution page's stream reads
    # Grown since v0.2.0 and not adapted (no operator action makes them): only a call in v34's shape passes.
    "ff_apply_dependency_to_child": Shape(8, 7),
    "ff_resolve_dependency": Shape(14, 5),
    "ff_append_frame": Shape(4, 19),
    "ff_complete_execution": Shape(12, 6),
    "ff_fail_execution": Shape(12, 8),
    "ff_delay_execution": Shape(9, 6),
    "ff_move_to_waiting_children": Shape(9, 5),
}
#: Replay's skipped-member form: 7 KEYS + one per edge, 2 ARGV + one per edge.
_REPLAY_SKIPPED = Shape(7, 2, extra=(1, 1))


def to_v34(call: Call) -> Call | None:
    """`call` in v34's shape, or None when it cannot be (a shape upstream's library would misread)."""
    shape = V34.get(call.function)
    if shape is None:
        return call
    if shape.adapt is not None:
        call = shape.adapt(call)
    if call.function == "ff_replay_execution" and len(call.keys) > 4:
        return call if _REPLAY_SKIPPED.fits(call) else None
    return call if shape.fits(call) else None
