"""Schedule refusals: every one names the field it is about."""

from __future__ import annotations

from ffcore.errors import InvalidInput


class ScheduleInvalid(InvalidInput):  # type: ignore[misc, valid-type]
    """Bad schedule input; `field` names it (e.g. "spec.cron", "template.kind", "overlap")."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__("invalid_input", [f"{field}: {message}"])
        self.field = field
        self.message = message
