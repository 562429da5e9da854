"""Schedule refusals: every one names the field it is about."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from ffcore.errors import FFError, InvalidInput


class ScheduleInvalid(InvalidInput):  # type: ignore[misc, valid-type]
    """Bad schedule input; `field` names it (e.g. "spec.cron", "template.kind", "overlap"). `errors` holds every
    (field, message) found at once, the first of them also as `field` / `message`."""

    def __init__(self, field: str, message: str, more: list[tuple[str, str]] | None = None) -> None:
        self.errors = [(field, message), *(more or [])]
        super().__init__("invalid_input", [f"{f}: {m}" for f, m in self.errors])
        self.field = field
        self.message = message


class ScheduleStateRefused(FFError):
    """An action that does not apply to the schedule's state (pause a paused one, resume an active one)."""

    def __init__(self, action: str, message: str) -> None:
        super().__init__(message)
        self.action = action
        self.message = message


class Collect:
    """Runs several checks and keeps every refusal, so one answer names all the bad fields."""

    def __init__(self) -> None:
        self.errors: list[tuple[str, str]] = []

    @contextlib.contextmanager
    def check(self) -> Iterator[None]:
        try:
            yield
        except ScheduleInvalid as e:
            self.errors.extend(e.errors)

    def raise_any(self) -> None:
        if self.errors:
            (field, message), *more = self.errors
            raise ScheduleInvalid(field, message, more)
