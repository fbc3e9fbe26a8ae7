"""The command-line spellings of analyze's search space: ``1:64`` (powers of two), ``1:4``
(every count), comma lists, ``none`` / ``auto`` preferred sizes and instance kinds, queue sizes
and timeouts; of its load (request rates); of the share of requests that may be rejected; and of
its time budget (``90s``, ``20m``, ``1h30m``)."""

from __future__ import annotations

import math
import re

from tritonctl.analyzer.search import AUTO, KIND_NAMES, AnalyzeError

DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s?)?")


def _ints(text: str, flag: str, minimum: int) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise AnalyzeError(f"{flag} {text!r}: expected whole numbers separated by commas") from None
    if not values:
        raise AnalyzeError(f"{flag} {text!r}: give at least one value")
    if min(values) < minimum:
        raise AnalyzeError(f"{flag} {text!r}: values must be at least {minimum}")
    return sorted(set(values))


def _range(text: str, flag: str) -> tuple[int, int]:
    start_text, _, end_text = text.partition(":")
    try:
        start, end = int(start_text), int(end_text)
    except ValueError:
        raise AnalyzeError(f"{flag} {text!r}: expected START:END with whole numbers") from None
    if start < 1 or end < start:
        raise AnalyzeError(f"{flag} {text!r}: needs 1 <= START <= END")
    return start, end


def parse_powers(text: str, flag: str) -> tuple[int, ...]:
    """``1,2,8`` as written, or ``START:END``: the powers of two from START up to END."""
    if ":" not in text:
        return tuple(_ints(text, flag, 1))
    start, end = _range(text, flag)
    values, value = [], 1
    while value <= end:
        if value >= start:
            values.append(value)
        value *= 2
    if not values:
        raise AnalyzeError(f"{flag} {text!r}: no power of two between {start} and {end}")
    return tuple(values)


def parse_counts(text: str, flag: str = "--instance-counts") -> tuple[int, ...]:
    """``1,2,4`` as written, or ``START:END``: every whole number from START to END."""
    if ":" not in text:
        return tuple(_ints(text, flag, 1))
    start, end = _range(text, flag)
    if end - start > 64:
        raise AnalyzeError(f"{flag} {text!r}: at most 65 values")
    return tuple(range(start, end + 1))


def parse_delays(text: str) -> tuple[int, ...]:
    """``0,100,1000``: queue delays in microseconds."""
    return tuple(_ints(text, "--queue-delays", 0))


def parse_queue_sizes(text: str) -> tuple[int, ...]:
    """``0,8,32``: default_queue_policy.max_queue_size values (0: unbounded)."""
    return tuple(_ints(text, "--max-queue-sizes", 0))


def parse_timeouts(text: str) -> tuple[int, ...]:
    """``0,5000,20000``: queue timeouts in microseconds after which a queued request is rejected (0: none)."""
    return tuple(_ints(text, "--queue-timeouts", 0))


def parse_rates(text: str) -> tuple[float, ...]:
    """``10,50,100`` or perf's ``START:END:STEP``: request rates (per second), swept in increasing order."""
    if ":" in text:
        from tritonctl.perf.options import PerfError, parse_request_rate_range

        try:
            return parse_request_rate_range(text)
        except PerfError as exc:
            raise AnalyzeError(str(exc).replace("--request-rate-range", "--request-rate")) from None
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise AnalyzeError(f"--request-rate {text!r}: expected requests per second, e.g. 50,100,200 or "
                           "50:200:50") from None
    if not values or not all(math.isfinite(v) and v > 0 for v in values):
        raise AnalyzeError(f"--request-rate {text!r}: give positive rates in requests per second, e.g. 50,100,200")
    return tuple(sorted(set(values)))


def parse_share(text: str, flag: str) -> float:
    """``0.01`` or ``1%``: a share from 0 up to (not including) 1."""
    value_text = text.strip()
    percent = value_text.endswith("%")
    try:
        value = float(value_text.removesuffix("%")) / (100.0 if percent else 1.0)
    except ValueError:
        value = math.nan
    if not 0.0 <= value < 1.0:
        raise AnalyzeError(f"{flag} {text!r}: give a share of the requests from 0 up to 1, e.g. 0.01 or 1%")
    return value


def parse_preferred(text: str) -> tuple[int, ...]:
    """``none``, ``auto`` (every power of two below each max_batch_size) or sizes, e.g. ``none,4,8``."""
    values: set[int] = set()
    for part in (p.strip().lower() for p in text.split(",") if p.strip()):
        if part == "none":
            values.add(0)
        elif part == "auto":
            values.update((0, AUTO))
        else:
            values.update(_ints(part, "--preferred-batch-sizes", 1))
    if not values:
        raise AnalyzeError(f"--preferred-batch-sizes {text!r}: use none, auto or sizes such as none,4,8")
    return tuple(sorted(values))


def parse_kinds(text: str) -> tuple[str, ...]:
    """``cpu``, ``gpu`` or both (``KIND_CPU`` spellings too)."""
    kinds = []
    for part in (p.strip().lower().removeprefix("kind_") for p in text.split(",") if p.strip()):
        if part not in KIND_NAMES:
            raise AnalyzeError(f"--instance-kinds: unknown kind {part!r}; use cpu, gpu or model")
        kinds.append(KIND_NAMES[part])
    if not kinds:
        raise AnalyzeError("--instance-kinds: give at least one kind")
    return tuple(dict.fromkeys(kinds))


def parse_duration(text: str, flag: str) -> float:
    """Seconds in ``90``, ``90s``, ``20m``, ``1h30m`` or ``1.5h``; at least one second."""
    compact = text.strip().lower().replace(" ", "")
    match = DURATION.fullmatch(compact) if compact else None
    if match is None or not any(match.groups()):
        raise AnalyzeError(f"{flag} {text!r}: give a duration such as 90s, 20m or 1h30m")
    hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    total = hours * 3600 + minutes * 60 + seconds
    if total < 1:
        raise AnalyzeError(f"{flag} {text!r}: at least one second")
    return total
