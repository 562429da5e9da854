"""Recurring schedules: cron (in a time zone) or fixed-interval executions, each fire exactly once.

`Client.schedules` is the door (`Schedules`); the scanner `ffcore.engine.schedule_scanner` fires due ones.
"""

from ..functions.schedule import ScheduleConflict, ScheduleExists, ScheduleNotFound
from .errors import ScheduleInvalid, ScheduleStateRefused
from .model import DEFAULT_CATCHUP, OVERLAPS, Run, Schedule, Template, actions_for
from .schedules import MISFIRE_GRACE_MS, Schedules, idempotency_key, state_refusal
from .spec import INTERVAL_WORDS, MIN_INTERVAL_MS, Spec, parse_interval

__all__ = ["DEFAULT_CATCHUP", "INTERVAL_WORDS", "MIN_INTERVAL_MS", "MISFIRE_GRACE_MS", "OVERLAPS", "Run", "Schedule",
           "ScheduleConflict", "ScheduleExists", "ScheduleInvalid", "ScheduleNotFound", "ScheduleStateRefused",
           "Schedules", "Spec", "Template", "actions_for", "idempotency_key", "parse_interval", "state_refusal"]
