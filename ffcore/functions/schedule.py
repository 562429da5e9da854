"""FCALL builders of recurring schedules (lua/schedule.lua; ours, not in the v0.2.0 contract).

A schedule's keys share the partition tag of its lane, so `schedule_fire` advances the schedule and
creates the execution (the contract's create, with an idempotency key made of schedule id + fire
time) in one atomic call.
"""

from __future__ import annotations

from ..errors import ERRORS, ScriptError
from ..keys import PartitionKeys, SchedKeys
from .base import Arg, Call, fn


class ScheduleNotFound(ScriptError):
    """No schedule has this id (or it was deleted)."""

    code = "schedule_not_found"


class ScheduleExists(ScriptError):
    """A schedule with this id exists already."""

    code = "schedule_exists"


class ScheduleConflict(ScriptError):
    """The schedule changed since it was read (its version moved): read it again and retry."""

    code = "schedule_conflict"
    kind = "retryable"


ERRORS["schedule_not_found"] = ScheduleNotFound
ERRORS["schedule_exists"] = ScheduleExists
ERRORS["schedule_conflict"] = ScheduleConflict


@fn("ff_schedule_fire")
def schedule_fire(
    k: SchedKeys, *, mode: str, version: str, expected_next: str, fire_at: int, new_next: int | None,
    missed: int = 0, previous_eid: str = "", create: Call | None = None, previous_core: str | None = None,
) -> Call:
    """One fire (mode "tick" / "trigger", with the built ff_create_execution `create`) or a drop of missed
    fire times (mode "advance", no create). Reply: status, eid, public_state, previous eid."""
    ix = PartitionKeys(k.n)
    keys = [k.definition, k.due, k.runs]
    args: list[Arg] = [mode, version, expected_next, fire_at, "" if new_next is None else new_next, missed,
                       previous_eid]
    if create is not None:
        keys += [previous_core or ix.noop, ix.created, *create.keys]
        args += create.args
    return Call("ff_schedule_fire", keys, args)


@fn("ff_schedule_put")
def schedule_put(k: SchedKeys, *, expect: str, next_fire_at: int | str | None, fields: dict[str, str]) -> Call:
    """Create (`expect="new"`) or update (`expect=<version read>`) a schedule's hash; `next_fire_at` None
    = no next fire, "keep" = unchanged. Reply: the new version."""
    flat: list[Arg] = [x for pair in fields.items() for x in pair]
    return Call("ff_schedule_put", [k.definition, k.due],
                [expect, "" if next_fire_at is None else next_fire_at, *flat])


@fn("ff_schedule_delete")
def schedule_delete(k: SchedKeys) -> Call:
    return Call("ff_schedule_delete", [k.definition, k.due, k.runs], [])


__all__ = ["ScheduleConflict", "ScheduleExists", "ScheduleNotFound", "schedule_delete", "schedule_fire",
           "schedule_put"]
