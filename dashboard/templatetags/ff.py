"""Template filters for engine values (integer ms timestamps, state names)."""

from __future__ import annotations

from django import template

from ffcore.execution.explain import fmt_ms

register = template.Library()


@register.filter
def ms(value: object) -> str:
    """Integer milliseconds -> 'YYYY-MM-DD HH:MM:SS UTC' ('' when unset)."""
    return fmt_ms(value)  # type: ignore[arg-type]


@register.filter
def ago(value: object, now_ms: object) -> str:
    """How long before `now_ms` (or after, for future times) a ms timestamp is, in words."""
    try:
        delta = int(now_ms) - int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return ""
    future = delta < 0
    s = abs(delta) // 1000
    text = f"{s}s" if s < 120 else f"{s // 60}m" if s < 7200 else f"{s // 3600}h" if s < 172800 else f"{s // 86400}d"
    return f"in {text}" if future else f"{text} ago"


@register.filter
def words(value: object) -> str:
    return str(value or "").replace("_", " ")


@register.filter
def get(mapping: object, key: object) -> object:
    return mapping.get(key) if isinstance(mapping, dict) else None
