"""The latency and duration trend chart of a task page, as geometry for an inline SVG
(drawn by ``templates/web/task.html``; no script, no image files).

Pure: takes the task's recent executions (oldest first, as
:func:`pgsched.stats.task_recent` gives them newest first) and returns where each line
and label goes. Both series share one y axis in seconds, from 0 to a round maximum.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

WIDTH, HEIGHT = 760, 220  # the SVG's viewBox, in user units
LEFT, RIGHT, TOP, BOTTOM = 56, 12, 14, 30  # margins around the plot area
SERIES = (("latency", "schedule to start"), ("duration", "duration"))


@dataclass
class Chart:
    """``lines``: per series ``{"key", "label", "points": "x,y x,y ...", "dots": [(x, y)]}``;
    ``y_ticks``: ``(y, label)``; ``x_labels``: ``(x, label, text-anchor)``
    (the first label starts at its point and the last ends at it, so neither is cut off); ``count``: executions drawn."""

    count: int
    lines: list[dict[str, Any]] = field(default_factory=list)
    y_ticks: list[tuple[float, str]] = field(default_factory=list)
    x_labels: list[tuple[float, str, str]] = field(default_factory=list)
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    right: int = WIDTH - RIGHT
    top: int = TOP
    bottom: int = HEIGHT - BOTTOM


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 times a power of ten that is at least ``value`` (> 0)."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if step * power >= value * (1 - 1e-9):
            return step * power
    return 10 * power


def seconds_label(value: float) -> str:
    """A short axis label for ``value`` seconds."""
    if value == 0:
        return "0"
    if value < 1:
        return f"{value * 1000:g} ms"
    if value < 120:
        return f"{value:g} s"
    return f"{value / 60:g} min"


def trend(rows: list[dict[str, Any]]) -> Chart:
    """The chart of ``rows`` (oldest first), each with ``latency`` and ``duration`` in
    seconds (None when the execution never started: left out of that line) and
    ``scheduled_at``."""
    chart = Chart(count=len(rows))
    values = [r[key] for r in rows for key, _ in SERIES if r.get(key) is not None]
    if not values:
        return chart
    top_value = nice_ceiling(max(max(values), 0.001))
    span_x = chart.right - chart.left
    span_y = chart.bottom - chart.top

    def x_of(i: int) -> float:
        return chart.left + (span_x * i / (len(rows) - 1) if len(rows) > 1 else span_x / 2)

    def y_of(v: float) -> float:
        return chart.bottom - span_y * max(v, 0.0) / top_value

    for key, label in SERIES:
        dots = [
            (round(x_of(i), 1), round(y_of(r[key]), 1))
            for i, r in enumerate(rows)
            if r.get(key) is not None
        ]
        chart.lines.append(
            {
                "key": key,
                "label": label,
                "dots": dots,
                "points": " ".join(f"{x},{y}" for x, y in dots),
            }
        )
    # 4 or 5 steps, whichever makes each step a round number (0.5 of 2, 1 of 5 ...)
    lead = top_value / 10 ** math.floor(math.log10(top_value))
    steps = 5 if round(lead, 6) in (2.5, 5.0) else 4
    chart.y_ticks = [
        (round(y_of(top_value * k / steps), 1), seconds_label(top_value * k / steps))
        for k in range(steps + 1)
    ]
    marks = sorted({0, len(rows) // 2, len(rows) - 1})

    def anchor(i: int) -> str:
        return (
            "middle"
            if len(marks) == 1
            else "start"
            if i == 0
            else "end"
            if i == len(rows) - 1
            else "middle"
        )

    chart.x_labels = [
        (round(x_of(i), 1), rows[i]["scheduled_at"].strftime("%m-%d %H:%M"), anchor(i))
        for i in marks
        if rows[i].get("scheduled_at") is not None
    ]
    return chart
