"""The overview's charts as SVG geometry (issue #25, item 4): server-rendered, no charting library, no script.

Each chart is a plain dict of numbers and labels that `templates/dashboard/_charts.html` turns into SVG
elements; colours come from CSS classes (the page's Content-Security-Policy allows no inline styles).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ffcore.engine.stats import MINUTE_MS, Series

#: Drawing area of the time charts (SVG user units; the SVG scales to its box).
WIDTH, HEIGHT, PAD_LEFT, PAD_BOTTOM = 600, 140, 34, 16
#: Lanes drawn with a colour of their own (the rest share the last one).
SERIES_CLASSES = 8


def fmt_ms(ms: int) -> str:
    """A duration for people: 850 ms, 3.4 s, 2.1 min."""
    if ms < 1000:
        return f"{ms} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    return f"{ms / 60_000:.1f} min"


def _clock(minute: int) -> str:
    # The server's fallback; ui.js rewrites every label carrying data-ms into the viewer's zone like the tables.
    return datetime.fromtimestamp(minute * MINUTE_MS / 1000, tz=UTC).strftime("%H:%M UTC")


def _nice_max(v: int) -> int:
    """The axis top: the first of 1, 2, 5, 10, 20, 50, ... at or above v."""
    k = 1
    while True:
        for step in (1, 2, 5):
            if step * k >= v:
                return step * k
        k *= 10


@dataclass
class Chart:
    width: int = WIDTH
    height: int = HEIGHT
    pad_left: int = PAD_LEFT
    plot_bottom: int = HEIGHT - PAD_BOTTOM
    y_max: int = 1
    start_label: str = ""
    end_label: str = ""
    #: The labelled minutes in epoch ms, for the browser to show in the viewer's zone.
    start_ms: int = 0
    end_ms: int = 0
    bars: list[dict[str, Any]] = field(default_factory=list)
    lines: list[dict[str, Any]] = field(default_factory=list)
    legend: list[dict[str, str]] = field(default_factory=list)
    total: int = 0


def _x(i: int, n: int) -> float:
    return PAD_LEFT + (WIDTH - PAD_LEFT) * i / n


def _y(v: int, top: int) -> float:
    return (HEIGHT - PAD_BOTTOM) - (HEIGHT - PAD_BOTTOM - 4) * v / top


def throughput(s: Series) -> Chart:
    """Completions (bottom) and failures (stacked on top) per minute."""
    top = _nice_max(max((d + f for d, f in zip(s.done, s.failed, strict=True)), default=0))
    c = Chart(y_max=top, start_label=_clock(s.first), end_label=_clock(s.first + s.minutes - 1),
              start_ms=s.first * MINUTE_MS, end_ms=(s.first + s.minutes - 1) * MINUTE_MS,
              total=sum(s.done) + sum(s.failed))
    w = (WIDTH - PAD_LEFT) / s.minutes
    for i, (d, f) in enumerate(zip(s.done, s.failed, strict=True)):
        x = round(_x(i, s.minutes) + 0.5, 1)
        y_done, y_all = _y(d, top), _y(d + f, top)
        rest = f": {d} completed, {f} failed"
        title, ms = _clock(s.first + i) + rest, (s.first + i) * MINUTE_MS
        if d:
            c.bars.append({"x": x, "y": round(y_done, 1), "w": round(w - 1, 1), "h": round(c.plot_bottom - y_done, 1),
                           "cls": "bar-done", "title": title,
                           "ms": ms, "rest": rest})
        if f:
            c.bars.append({"x": x, "y": round(y_all, 1), "w": round(w - 1, 1), "h": round(y_done - y_all, 1),
                           "cls": "bar-failed", "title": title,
                           "ms": ms, "rest": rest})
    c.legend = [{"cls": "bar-done", "label": f"completed ({sum(s.done)})"},
                {"cls": "bar-failed", "label": f"failed ({sum(s.failed)})"}]
    return c


def backlog(s: Series) -> Chart:
    """One line per lane: its backlog at each sampled minute (gaps where no sample was taken)."""
    top = _nice_max(max((v for vals in s.backlog.values() for v in vals if v is not None), default=0))
    c = Chart(y_max=top, start_label=_clock(s.first), end_label=_clock(s.first + s.minutes - 1),
              start_ms=s.first * MINUTE_MS, end_ms=(s.first + s.minutes - 1) * MINUTE_MS)
    for j, (lane, vals) in enumerate(sorted(s.backlog.items())):
        cls = f"series-{min(j, SERIES_CLASSES - 1)}"
        segments: list[list[str]] = []
        run: list[str] = []
        for i, v in enumerate(vals):
            if v is None:
                if run:
                    segments.append(run)
                run = []
                continue
            run.append(f"{_x(i, s.minutes - 1 if s.minutes > 1 else 1):.1f},{_y(v, top):.1f}")
        if run:
            segments.append(run)
        last = next((v for v in reversed(vals) if v is not None), None)
        for seg in segments:
            if len(seg) == 1:  # a single sample: a short tick so it shows
                x, y = seg[0].split(",")
                seg = [seg[0], f"{float(x) + 3:.1f},{y}"]
            c.lines.append({"cls": cls, "points": " ".join(seg), "lane": lane})
        c.legend.append({"cls": cls, "label": f"{lane} ({last if last is not None else 'no sample'})"})
        c.total += 1 if last is not None else 0
    return c


def latency(s: Series) -> list[dict[str, Any]]:
    """Per lane: p50 and p95 claim-to-complete as bars on a shared scale, with the numbers."""
    top = max((p95 for _, p95, _ in s.latency.values()), default=0) or 1
    out = []
    for j, (lane, (p50, p95, n)) in enumerate(sorted(s.latency.items())):
        out.append({"lane": lane, "cls": f"series-{min(j, SERIES_CLASSES - 1)}", "p50": fmt_ms(p50),
                    "p95": fmt_ms(p95), "n": n, "w50": round(100 * p50 / top, 1), "w95": round(100 * p95 / top, 1)})
    return out


def charts(s: Series) -> dict[str, Any]:
    return {"throughput": throughput(s), "backlog": backlog(s), "latency": latency(s)}
