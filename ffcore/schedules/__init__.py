"""Recurring schedules: cron (in a time zone) or fixed-interval executions, each fire exactly once.

`Client.schedules` is the door (`Schedules`); the scanner `ffcore.engine.schedule_scanner` fires due ones.
"""

from ..functions.schedule import ScheduleConflict, ScheduleExists, ScheduleNotFound
from .errors import ScheduleInvalid
from .model import DEFAULT_CATCHUP, OVERLAPS, Run, Schedule, Template
from .schedules import MISFIRE_GRACE_MS, Schedules, idempotency_key
from .spec import MIN_INTERVAL_MS, Spec

__all__ = ["DEFAULT_CATCHUP", "MIN_INTERVAL_MS", "MISFIRE_GRACE_MS", "OVERLAPS", "Run", "Schedule", "ScheduleConflict",
           "ScheduleExists", "ScheduleInvalid", "ScheduleNotFound", "Schedules", "Spec", "Template", "idempotency_key"]
