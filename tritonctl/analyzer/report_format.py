"""Numbers, durations and timestamps as the analyze report prints them.

One place for the report's number style: throughput without decimals from 100/s up, latencies
to two decimals below 10 ms, "n/a" for what was not measured, durations in s/min/h, timestamps to
the second.
"""

from __future__ import annotations

import math


def period(meta: dict) -> str:
    """When the run started and finished, e.g. "2025-01-01 10:00:00 to 10:06:12 UTC"."""
    started, finished = (moment(meta.get(key)) for key in ("started", "finished"))
    if started and finished:
        if started[:10] == finished[:10]:
            finished = finished[11:]  # same day: the time alone
        if started.endswith(" UTC") and finished.endswith(" UTC"):
            started = started.removesuffix(" UTC")
    return " to ".join(text for text in (started, finished) if text)


def moment(value) -> str:
    """An ISO timestamp to the second, "UTC" for a UTC one; anything else as given."""
    from datetime import datetime, timedelta

    if not value:
        return ""
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError:
        return str(value)
    text = parsed.strftime("%Y-%m-%d %H:%M:%S")
    if parsed.utcoffset() is None:
        return text
    return f"{text} UTC" if parsed.utcoffset() == timedelta(0) else f"{text} {parsed.strftime('%z')}"


def ratio(numerator, denominator) -> float:
    """numerator / denominator, NaN when either is unknown or the denominator is 0."""
    try:
        return float(numerator) / float(denominator)
    except (TypeError, ValueError, ZeroDivisionError):
        return math.nan


def finite(value) -> bool:
    """Whether a value is a real, finite number (not None, NaN, inf or text)."""
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def sortable(value):
    """The key a table cell sorts by: the number, or "" for an unknown one."""
    return float(value) if finite(value) else ""


def number(value, spec: str) -> str:
    """A number in a format spec, or "n/a"."""
    return format(float(value), spec) if finite(value) else "n/a"


def integer(value, thousands: bool = False) -> str:
    """A count or knob value as a whole number, or "?"."""
    return (f"{int(value):,}" if thousands else str(int(value))) if finite(value) else "?"


def throughput(value) -> str:
    """Inferences per second: whole numbers from 100/s up, one decimal below."""
    if not finite(value):
        return "n/a"
    return f"{value:,.0f}" if value >= 100 else f"{value:,.1f}"


def ms(value) -> str:
    """Milliseconds: two decimals below 10 ms, one below 100 ms, whole numbers above."""
    if not finite(value):
        return "n/a"
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def duration(seconds) -> str:
    """A wall time: "42 s", "6 min 12 s", "2 h 05 min"."""
    if not finite(seconds):
        return "?"
    seconds = round(float(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"
