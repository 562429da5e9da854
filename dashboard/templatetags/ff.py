"""Template filters for engine values: times (shown in the viewer's zone by ui.js, the raw value in a tooltip),
state and reason names, and the engine's blocking details with their ids linked."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from urllib.parse import urlencode

from django import template
from django.urls import NoReverseMatch, reverse
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

from ffcore.execution.explain import fmt_ms

register = template.Library()


def _int(value: object) -> int | None:
    try:
        v = int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return None
    return v if v > 0 else None


def time_html(v: int) -> SafeString:
    """One timestamp as a <time>: UTC text that ui.js rewrites into the viewer's zone; raw ms in the tooltip."""
    iso = datetime.fromtimestamp(v / 1000, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    utc = fmt_ms(v)
    return format_html('<time class="ts" datetime="{}" data-ms="{}" title="{} ms · {}">{}</time>', iso, v, v, utc, utc)


@register.filter
def ms(value: object) -> str:
    """Integer milliseconds -> a <time> element ('' when unset). HTML: for text, never inside an attribute."""
    v = _int(value)
    return time_html(v) if v is not None else ""


@register.filter
def utc(value: object) -> str:
    """Integer milliseconds -> plain 'YYYY-MM-DD HH:MM:SS UTC' text, for attributes where a <time> cannot go."""
    v = _int(value)
    return fmt_ms(v) if v is not None else ""


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


#: "lease_lease_revoked": the contract writes `'lease_' .. ownership_state`, whose values already start with it.
_DOUBLED = re.compile(r"\b([a-z]+)_\1_")


@register.filter
def reason(value: object) -> str:
    """A failure / close reason in words, without the contract's doubled prefixes."""
    return _DOUBLED.sub(r"\1_", str(value or "")).replace("_", " ")


#: Blocking reasons (the contract's `blocking_reason`) in words.
BLOCKING = {
    "waiting_for_budget": "held by a budget", "paused_by_budget": "held by a budget",
    "waiting_for_quota": "rate limited by a quota", "waiting_for_children": "waiting for dependencies",
    "waiting_for_capable_worker": "no worker with the required capabilities",
    "waiting_for_worker": "waiting for a worker", "waiting_for_delay": "delayed",
    "waiting_for_retry_backoff": "retry backoff", "waiting_for_resume_delay": "resume delay",
    "paused_by_operator": "paused by an operator", "paused_by_policy": "paused by policy",
    "waiting_for_signal": "waiting for a signal", "waiting_for_approval": "waiting for approval",
    "waiting_for_callback": "waiting for a callback", "waiting_for_tool_result": "waiting for a tool result",
    "waiting_for_operator_review": "escalated to an operator",
}


@register.filter
def blocking(value: object) -> str:
    v = str(value or "")
    return BLOCKING.get(v, v.replace("_", " ")) if v and v != "none" else ""


@register.filter
def state_label(public_state: object, blocking_reason: object = "") -> str:
    """The public state in words, naming what holds a rate-limited execution (budget or quota)."""
    s = str(public_state or "")
    b = str(blocking_reason or "")
    if s == "rate_limited" and b in ("waiting_for_budget", "paused_by_budget"):
        return "budget held"
    if s == "rate_limited" and b == "waiting_for_quota":
        return "quota limited"
    return s.replace("_", " ")


_DETAIL_TIME = re.compile(r"\b(until|at) (\d{13})\b")
_DETAIL_EDGE = re.compile(r"\bincl ([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\b")
_UTC_STAMP = re.compile(r"\b\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC\b")


@register.filter
def detail(value: object, flow_id: object = "") -> str:
    """An engine blocking detail in human terms: epoch-ms times as <time>, the unresolved dependency edge
    ("incl <edge id>", for a flow member) linked to its row in the execution page's flow section."""
    text = str(escape(str(value or "")))
    text = _DETAIL_TIME.sub(lambda m: f"{m.group(1)} {time_html(int(m.group(2)))}", text)
    if flow_id:
        # The execution page's flow section lists its upstream edges (row id "edge-<id>", with the execution).
        text = _DETAIL_EDGE.sub(lambda m: f'incl <a class="mono" href="#edge-{m.group(1)}" '
                                          f'title="dependency edge {m.group(1)}: its upstream execution is listed '
                                          f'under Flow">{m.group(1)[:8]}…</a>', text)
    return mark_safe(text)  # noqa: S308 - built from escaped text and our own markup


@register.filter
def stamps(value: object) -> str:
    """Plain text (e.g. the 'why' line) with its 'YYYY-MM-DD HH:MM:SS UTC' times as <time> elements."""
    text = str(escape(str(value or "")))

    def one(m: re.Match[str]) -> str:
        when = datetime.strptime(m.group(0), "%Y-%m-%d %H:%M:%S UTC").replace(tzinfo=UTC)
        return time_html(int(when.timestamp() * 1000))

    return mark_safe(_UTC_STAMP.sub(one, text))  # noqa: S308 - escaped text and our own markup


@register.filter
def duration(start: object, end: object) -> str:
    """The span between two ms timestamps in words ('' when either is unset)."""
    a, b = _int(start), _int(end)
    if a is None or b is None or b < a:
        return ""
    return human_ms(b - a)


def human_ms(d: int) -> str:
    if d < 1000:
        return f"{d} ms"
    if d < 60_000:
        return f"{d / 1000:.1f} s"
    if d < 3_600_000:
        return f"{d // 60_000} min {d % 60_000 // 1000} s"
    return f"{d // 3_600_000} h {d % 3_600_000 // 60_000} min"


@register.filter
def get(mapping: object, key: object) -> object:
    return mapping.get(key) if isinstance(mapping, dict) else None


@register.simple_tag(takes_context=True)
def theme_pref(context: template.Context) -> str:
    """The signed-in user's stored theme: "light", "dark" or "auto" (follow the OS)."""
    from ..views.ui import user_theme

    request = context.get("request")
    return user_theme(request) if request is not None else "auto"


@register.simple_tag(takes_context=True)
def theme_next(context: template.Context) -> str:
    """The choice the theme button moves to: system → dark → light → system (a plain form post works too)."""
    return {"auto": "dark", "dark": "light", "light": "auto"}[theme_pref(context)]


@register.filter
def took(value: object) -> str:
    """A duration in ms -> words ('' when unset)."""
    try:
        return human_ms(int(value))  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return ""


_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\Z")
#: Audit actions whose target is a bare flow / budget / quota id.
_FLOW_ACTIONS = frozenset({"create_flow", "cancel_flow", "add_flow_member", "stage_edge", "apply_edge",
                           "set_flow_tags"})


@register.filter
def target_href(entry: object) -> str:
    """The page an audit entry's target names ('' when none): an execution, a flow, a budget, a quota, a lane."""
    target, action = str(getattr(entry, "target", "")), str(getattr(entry, "action", ""))
    try:
        if target.startswith("{fp:"):
            return reverse("execution", args=[target])
        if target.startswith("budget:") and _UUID.match(target[7:]):
            return reverse("budget", args=[target[7:]])
        if target.startswith("lane:") and len(target) > 5:
            return reverse("executions") + "?" + urlencode({"lane": target[5:]})
        if _UUID.match(target):
            if action in _FLOW_ACTIONS:
                return reverse("flow", args=[target])
            if action == "create_budget":
                return reverse("budget", args=[target])
            if action == "create_quota":
                return reverse("quota", args=[target])
    except NoReverseMatch:
        return ""
    return ""


@register.filter
def id_ms(stream_id: object) -> str:
    """The milliseconds part of a stream entry id ("1795711268312-0" -> "1795711268312"; '' if not an id)."""
    head = str(stream_id or "").split("-", 1)[0]
    return head if head.isdigit() else ""
