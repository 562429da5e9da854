"""When a schedule fires: a cron expression in a time zone (cronsim) or a fixed interval in ms.

Fire times are integer ms. A cron schedule's times follow its zone's wall clock, DST included, as
cronsim computes them, which is what Vixie/Debian cron does: a time the spring-forward gap skips fires
once, at the first instant after the gap; a fixed time the autumn fold repeats (`30 2 * * *`) fires
once, at its first instant; an expression whose hour field is `*` (`*/30 * * * *`) keeps firing
through both passes of the repeated hour, as it counts real minutes. An interval schedule fires at
`anchor + k * interval` (k >= 1), whatever the zone.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cron_descriptor import ExpressionDescriptor, Options  # type: ignore[import-untyped]
from cronsim import CronSim, CronSimError

from .errors import ScheduleInvalid

#: Shortest and longest interval a schedule may have.
MIN_INTERVAL_MS = 1000
MAX_INTERVAL_MS = 10 * 366 * 86_400_000


#: "every 5 minutes", "every 2 h", "every 30s", "every minute", "90" (seconds): ASCII digits, English units.
_INTERVAL = re.compile(r"(?:every\s+)?(?:([0-9]{1,12}(?:\.[0-9]{1,3})?)\s*)?([a-z]+)?\Z", re.ASCII)
_UNITS_MS = {
    **dict.fromkeys(("ms", "msec", "msecs", "millisecond", "milliseconds"), 1),
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1000),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60_000),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), 3_600_000),
    **dict.fromkeys(("d", "day", "days"), 86_400_000),
}
INTERVAL_WORDS = ('write "every <number> <unit>" with unit ms, s, min, h or d (or their English words), '
                  'e.g. "every 5 minutes", "every 2 h", "every 30s"')


def parse_interval(text: object, field: str = "spec.interval_ms") -> int:
    """An interval an operator types, in ms: "every 5 minutes", "every 2 h", "every 30s", "every minute";
    a bare number is seconds ("90", "1.5"). Anything else (nan, inf, "²", "5 fortnights") is refused by name."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        if not math.isfinite(text):
            raise ScheduleInvalid(field, f"must be a finite number of seconds, got {text}")
        text = repr(text)
    if not isinstance(text, str):
        raise ScheduleInvalid(field, INTERVAL_WORDS)
    m = _INTERVAL.match(" ".join(text.lower().split()))
    number, unit = (m.group(1), m.group(2)) if m else (None, None)
    if not m or (number is None and (unit is None or not text.lower().strip().startswith("every"))) \
            or (unit is not None and unit not in _UNITS_MS):
        raise ScheduleInvalid(field, f"not an interval: {text.strip()!r}; {INTERVAL_WORDS}")
    ms = Decimal(number or 1) * _UNITS_MS[unit or "s"]
    if ms != ms.to_integral_value():
        raise ScheduleInvalid(field, f"{text.strip()!r} is not a whole number of milliseconds")
    return int(ms)


def zone(name: str, field: str = "spec.timezone") -> ZoneInfo:
    if not isinstance(name, str) or not name or name.startswith(("/", ".")) or ".." in name:
        raise ScheduleInvalid(field, f"unknown time zone {name!r}")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError, TypeError):
        raise ScheduleInvalid(field, f"unknown time zone {name!r}") from None


@dataclass(frozen=True)
class Spec:
    """Either `cron` (5 fields, in `timezone`) or `interval_ms` (from `anchor_ms`)."""

    cron: str | None = None
    timezone: str = "UTC"
    interval_ms: int | None = None
    anchor_ms: int = 0

    @classmethod
    def build(cls, *, cron: str | None = None, timezone: str | None = None, interval_ms: int | None = None,
              anchor_ms: int = 0) -> Spec:
        """Validate and build; every refusal names its field (spec.cron, spec.timezone, spec.interval_ms)."""
        cron = cron.strip() if isinstance(cron, str) else cron
        if (cron in (None, "")) == (interval_ms is None):
            raise ScheduleInvalid("spec", "give exactly one of cron or interval_ms")
        tz = timezone or "UTC"
        zone(tz)
        if interval_ms is not None:
            if isinstance(interval_ms, bool) or not isinstance(interval_ms, int):
                raise ScheduleInvalid("spec.interval_ms", "must be an integer number of milliseconds")
            if interval_ms < MIN_INTERVAL_MS:
                raise ScheduleInvalid("spec.interval_ms", f"must be at least {MIN_INTERVAL_MS} ms (1 s), "
                                                          f"got {interval_ms}")
            if interval_ms > MAX_INTERVAL_MS:
                raise ScheduleInvalid("spec.interval_ms", f"must be at most {MAX_INTERVAL_MS} ms (10 years)")
            return cls(None, tz, interval_ms, anchor_ms)
        if not isinstance(cron, str):
            raise ScheduleInvalid("spec.cron", "must be a string")
        if len(cron.split()) != 5:
            raise ScheduleInvalid("spec.cron", f"{cron!r} must have 5 fields: minute hour day month weekday")
        try:
            next(CronSim(cron, datetime.now(UTC)))
        except (CronSimError, StopIteration, ValueError, IndexError, KeyError, OverflowError) as e:
            raise ScheduleInvalid("spec.cron", f"invalid cron expression {cron!r}: {e or 'never fires'}") from None
        return cls(cron, tz, None, 0)

    # ------------------------------------------------------------------ fire times
    def after(self, t_ms: int) -> Iterator[int]:
        """Fire times strictly after `t_ms`, ascending (endless)."""
        if self.interval_ms is not None:
            i = self.interval_ms
            k = max(0, (t_ms - self.anchor_ms) // i) + 1
            while True:
                yield self.anchor_ms + k * i
                k += 1
        assert self.cron is not None
        start = datetime.fromtimestamp(t_ms / 1000, ZoneInfo(self.timezone))
        for dt in CronSim(self.cron, start):
            ms = int(dt.timestamp() * 1000)
            if ms > t_ms:
                yield ms

    def next_after(self, t_ms: int) -> int:
        return next(self.after(t_ms))

    def upcoming(self, t_ms: int, n: int) -> list[int]:
        it = self.after(t_ms)
        return [next(it) for _ in range(n)]

    def due(self, first_ms: int, now_ms: int, cap: int) -> tuple[list[int], int]:
        """Fire times from `first_ms` (itself a fire time) up to `now_ms`: the last `cap` of them and how
        many came before those (counted arithmetically for intervals; cron walks at most 100,000)."""
        if first_ms > now_ms:
            return [], 0
        if self.interval_ms is not None:
            total = (now_ms - first_ms) // self.interval_ms + 1
            keep = min(total, cap)
            last = first_ms + (total - 1) * self.interval_ms
            return [last - (keep - 1 - j) * self.interval_ms for j in range(keep)], total - keep
        times = [first_ms]
        it = self.after(first_ms)
        for _ in range(100_000):
            t = next(it)
            if t > now_ms:
                break
            times.append(t)
        return times[-cap:] if cap else [], max(0, len(times) - cap)

    # ------------------------------------------------------------------ words
    def describe(self) -> str:
        """The spec in words: "At 09:00, only on Monday, Europe/Paris" / "Every 10 s"."""
        if self.interval_ms is not None:
            return "Every " + duration_words(self.interval_ms)
        assert self.cron is not None
        options = Options()
        options.use_24hour_time_format = True
        try:
            words = ExpressionDescriptor(self.cron, options).get_description()
        except Exception:  # noqa: BLE001 - words are a courtesy; the expression itself was validated
            words = self.cron
        return f"{words}, {self.timezone}"

    def as_fields(self) -> dict[str, str]:
        return {"cron": self.cron or "", "timezone": self.timezone,
                "interval_ms": "" if self.interval_ms is None else str(self.interval_ms),
                "anchor_ms": str(self.anchor_ms)}

    @classmethod
    def from_fields(cls, f: dict[str, str]) -> Spec:
        interval = f.get("interval_ms") or ""
        return cls(f.get("cron") or None, f.get("timezone") or "UTC", int(interval) if interval else None,
                   int(f.get("anchor_ms") or 0))


def duration_words(ms: int) -> str:
    """The largest unit that divides `ms` exactly: 300000 -> "5 min" (parse_interval reads it back)."""
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if ms % size == 0:
            return f"{ms // size} {unit}"
    return f"{ms} ms"
